package ir

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode: Decode never panics, and whatever it accepts encodes to a
// fixed point (decode -> encode -> decode -> encode is stable).
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		once := Encode(p)
		p2, err := Decode(once)
		if err != nil {
			t.Fatalf("re-decoding our own encoding failed: %v\n%s", err, once)
		}
		if twice := Encode(p2); !bytes.Equal(once, twice) {
			t.Fatalf("encoding is not a fixed point:\n%s\n---\n%s", once, twice)
		}
	})
}

// fuzzSeeds are hand-written documents for the decoder fuzz targets.
var fuzzSeeds = []string{
	`{}`, `null`, `[]`, `{"ir_version": 0.2, "abi_version": 0}`,
	`{"buffers": [{"id": 0, "name": "\u00e9\ud83d\ude00", "kind": "WEIGHT", "dtype": "I4", "shape": [], "space": "REGISTER", "source": "w"}]}`,
	`{"tasks": [{"id": 0, "op": "FUSED", "inputs": [], "outputs": [0], "out_counter": 0, "params": {"recipe": {"steps": [1.5e300, -0.0, NaN]}}, "sm": -1}]}`,
	`{"pages": {"buffer_to_page": {" 7": 1, "7": 2}, "pages": [{"id": 1, "space": "HBM", "nbytes": 0}]}, "config": {"sm_assignment": {"3": 1}, "tiling": {"gemv": {"N_tile": 64}}}}`,
	`{"meta": {"gpu": "h100", "x": [1, {"y": 1E400}]}, "target": null, "config": null, "counters": [{"id": 0, "init": -3}]}`,
}
