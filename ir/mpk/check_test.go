package mpk_test

import (
	"testing"

	"github.com/amk-dev/amk/ir/mpk"
)

// amk's exports of its lowered presets pass MPK's checker.
func TestExportsOfLoweredPresetsAreValid(t *testing.T) {
	for _, preset := range []string{"toy", "small", "llama-1b"} {
		t.Run(preset, func(t *testing.T) {
			g, err := mpk.ToGraph(lowered(t, preset), mpk.ExportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep := mpk.Check(g, mpk.CheckOptions{}); !rep.OK {
				t.Fatal(rep)
			}
		})
	}
}
