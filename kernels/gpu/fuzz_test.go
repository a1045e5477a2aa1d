package gpu

import (
	"testing"

	"github.com/amk-dev/amk/model"
)

// The model spec travels in a protocol frame: decoding never panics, and
// whatever it accepts round-trips.
func FuzzDecodeModel(f *testing.F) {
	for _, name := range []string{"toy", "small", "llama-1b"} {
		cfg, _ := model.Preset(name)
		f.Add(encodeModel(cfg))
	}
	f.Add(`{"config": {"hidden": -1}, "dtype": "F32"}`)
	f.Add(`{"dtype": "I4"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := decodeModel(s)
		if err != nil {
			return
		}
		back, err := decodeModel(encodeModel(cfg))
		if err != nil || back != cfg {
			t.Fatalf("accepted %q but it does not round-trip: %+v vs %+v (%v)", s, back, cfg, err)
		}
	})
}
