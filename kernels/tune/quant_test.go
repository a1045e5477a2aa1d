package tune

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
)

// Loop 1 covers the quantised GEMV: its case is the lm_head tiles of the
// quantised case model (int8 / packed int4 weights with their scales),
// proved and accepted by the device checks, and its proposals tune the
// block size and qc, the quantised kernel's own knob, not the fp paths'.
func TestQuantizedGEMVCase(t *testing.T) {
	for _, spec := range []string{"toy:w8a16", "toy:w4a16-g32"} {
		c, err := NewCase(ir.OpGEMVTile, ir.BF16, h200(t), spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		quant := 0
		for i := range c.Program.Tasks {
			if _, _, ok := ir.TileQuant(&c.Program.Tasks[i]); ok {
				quant++
			}
		}
		if quant != len(c.Program.Tasks) || !c.Quant.On() || !strings.Contains(c.Describe, "lm_head") {
			t.Errorf("%s: %d of %d tasks quantised (%s)", spec, quant, len(c.Program.Tasks), c.Describe)
		}
		if _, err := c.Reference(); err != nil {
			t.Errorf("%s: reference: %v", spec, err)
		}
	}
	var names []string
	for _, k := range KnobsFor(ir.OpGEMVTile, true) {
		names = append(names, k.Name)
	}
	if got := strings.Join(names, ","); got != "threads,qc" {
		t.Errorf("quantised GEMV knobs %s", got)
	}
	if _, err := NewCase(ir.OpRMSNORM, ir.BF16, h200(t), "toy:w8a16"); err == nil {
		t.Error("a quantised RMSNORM case")
	}
	// The loop runs it: results rows name the quantised kernel apart.
	c, err := NewCase(ir.OpGEMVTile, ir.BF16, h200(t), "toy:w8a16")
	if err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(t.TempDir(), "results.tsv")
	var log bytes.Buffer
	d := &fakeDevice{lat: map[string]float64{"default": 10, "threads=128": 10, "qc=1": 11, "qc=4": 9}}
	s, err := Tune(context.Background(), d, Options{Target: h200(t), Budget: 4, Results: results, Case: c, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if s.Quantization != "w8a16" || s.BestVariant == nil || *s.BestVariant != "qc=4" {
		t.Errorf("summary %+v", s)
	}
	rows, err := flywheel.ReadRows(results)
	if err != nil || len(rows) == 0 || rows[0].Model != "inst:gemv_tile:w8a16" {
		t.Errorf("rows %+v, %v", rows, err)
	}
}
