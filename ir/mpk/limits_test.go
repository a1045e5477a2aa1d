package mpk_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir/mpk"
)

func handMirage(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "good", "hand_mirage.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDecodeRefusesRepeatedKeys: a repeated key anywhere in a task graph is
// refused, as in every document amk reads (MPK's loader would keep one of
// the two values; amk's readers must not disagree on which).
func TestDecodeRefusesRepeatedKeys(t *testing.T) {
	doc := handMirage(t)
	for _, tc := range []struct{ name, from, to string }{
		{"top level", `"first_tasks"`, `"first_tasks": [2], "first_tasks"`},
		{"in a task", `"task_type": 101,`, `"task_type": 101, "task_type": 120,`},
		{"in a view", `"base_ptr": "x", "offset": 0`, `"base_ptr": "x", "offset": 0, "offset": 128`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(doc, tc.from) {
				t.Fatalf("hand_mirage.json has no %s", tc.from)
			}
			_, err := mpk.Decode([]byte(strings.Replace(doc, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), "duplicate key") {
				t.Fatalf("err = %v, want a duplicate key error", err)
			}
		})
	}
}

// TestDecodeCapsViews: a view whose bytes reach past MaxViewBytes (or whose
// extent overflows) is refused: the import sizes a buffer to the furthest
// byte any view reaches.
func TestDecodeCapsViews(t *testing.T) {
	doc := handMirage(t)
	from := `{"base_ptr": "w", "offset": 0, "dims": [64, 128], "strides": [128, 1], "data_type": 941}`
	if !strings.Contains(doc, from) {
		t.Fatal("hand_mirage.json has no w view")
	}
	for _, to := range []string{
		`{"base_ptr": "w", "offset": 0, "dims": [2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647], "strides": [2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647, 2147483647], "data_type": 941}`,
		`{"base_ptr": "w", "offset": 0, "dims": [1048576, 1048576], "strides": [1048576, 1], "data_type": 950}`,
	} {
		_, err := mpk.Decode([]byte(strings.Replace(doc, from, to, 1)))
		if err == nil || !strings.Contains(err.Error(), "bytes") {
			t.Fatalf("err = %v, want the view refused for its size", err)
		}
	}
}
