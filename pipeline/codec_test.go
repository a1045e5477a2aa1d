package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTestdataRoundTrips(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	if len(files) < 5 {
		t.Fatalf("testdata has %d schedules", len(files))
	}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		s, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		a, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Decode(a)
		if err != nil {
			t.Fatalf("%s re-encoded: %v", f, err)
		}
		b, _ := Encode(s2)
		if !bytes.Equal(a, b) {
			t.Errorf("%s does not round-trip", f)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	seed, _ := os.ReadFile(filepath.Join("testdata", "amd-4wave-fp8.json"))
	edit := func(old, new string) string {
		if !strings.Contains(string(seed), old) {
			t.Fatalf("testdata lacks %q", old)
		}
		return strings.Replace(string(seed), old, new, 1)
	}
	cases := []struct{ name, doc, want string }{
		{"empty", "", "not a pipeline schedule"},
		{"array", "[]", "not a pipeline schedule"},
		{"format", edit(`"amk-pipeline/1"`, `"amk-pipeline/9"`), `format "amk-pipeline/9"`},
		{"unknown key", edit(`"quadrants": 2,`, `"quadrants": 2, "stages": 3,`), `unknown field "stages"`},
		{"trailing data", string(seed) + "{}", "data after the JSON object"},
		{"unknown op", edit(`"LOAD_A", "sub": 0`, `"LOAD_C", "sub": 0`), `unknown op "LOAD_C"`},
		{"sub range", edit(`"MMA_LOAD_B", "sub": 1`, `"MMA_LOAD_B", "sub": 7`), "mini-iter 1 op 2: MMA_LOAD_B sub=7 out of range"},
		{"missing sub", edit(`{"op": "LOAD_A", "sub": 0, "stage": "same"}`, `{"op": "LOAD_A"}`), `mini-iter 1 op 1: LOAD_A needs "sub"`},
		{"bad stage", edit(`"sub": 1, "stage": "same"}, {"op": "MMA", "quadrant": [0, 1]`, `"sub": 1, "stage": "next"}, {"op": "MMA", "quadrant": [0, 1]`), `stage "next"`},
		{"mma quadrant", edit(`"quadrant": [0, 0]`, `"quadrant": [0]`), `MMA needs "quadrant"`},
		{"mma range", edit(`"quadrant": [0, 0]`, `"quadrant": [0, -1]`), "out of range"},
		{"partitions", edit(`"partitions": 2`, `"partitions": 3`), "partitions=3: want 2"},
		{"ordering", edit(`"identity"`, `"shuffle"`), `ordering "shuffle"`},
		{"rule set", edit(`"double_buffer_default"`, `"triple"`), `unknown edge rule set "triple"`},
		{"rule pair", edit(`"to": "MMA"`, `"to": "LOAD_A"`), "no dependency runs FRAGMENT_LOAD -> LOAD_A"},
		{"scope", edit(`"cross_half"`, `"half"`), `scope "half"`},
		{"prologue form", edit(`"form": "derived"`, `"form": "auto"`), `prologue.form "auto"`},
		{"mma in prologue", edit(`"bootstrap": [{"op": "MMA_LOAD_A", "sub": 0, "stage": "same"}`, `"bootstrap": [{"op": "MMA", "quadrant": [0, 0]}`), "an MMA in the prologue"},
		{"too big", `{"format": "` + strings.Repeat("x", MaxFileBytes) + `"}`, "at most"},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestDecodeRefusesRepeatedKeys: a key given twice, or twice in spellings
// that differ only by case (which Go's JSON decoder matches to one field),
// is refused wherever it stands.
func TestDecodeRefusesRepeatedKeys(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "amd-4wave-fp8.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, tc := range []struct{ name, from, to string }{
		{"top level", `"quadrants": 2,`, `"quadrants": 2, "quadrants": 1,`},
		{"by case", `"quadrants": 2,`, `"quadrants": 2, "Quadrants": 1,`},
		{"in an op", `{"op": "MMA", "quadrant": [0, 0]}`, `{"op": "MMA", "quadrant": [0, 0], "quadrant": [0, 1]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(doc, tc.from) {
				t.Fatalf("the seed file has no %s", tc.from)
			}
			_, err := Decode([]byte(strings.Replace(doc, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), "duplicate key") {
				t.Fatalf("err = %v, want a duplicate key error", err)
			}
		})
	}
}
