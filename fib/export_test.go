package fib

import (
	"slices"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// Every op the decode-step lowering emits has an exported Definition, and
// every exported Definition and workload holds (Export refuses otherwise).
func TestExportCoversTheDecodeStep(t *testing.T) {
	for _, name := range []string{"small", "llama-8b", "toy"} {
		cfg, err := model.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Export(name, cfg, ExportOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		covered := map[ir.Op]bool{}
		names := map[string]bool{}
		for _, e := range out {
			if names[e.Definition.Name] {
				t.Errorf("%s: %s exported twice", name, e.Definition.Name)
			}
			names[e.Definition.Name] = true
			for _, op := range e.Ops {
				covered[op] = true
			}
			if !e.Definition.HasTag("model:"+name) || !e.Definition.HasTag("stage:decode") {
				t.Errorf("%s: %s lacks the model: or stage:decode tag: %v", name, e.Definition.Name, e.Definition.Tags)
			}
			if len(e.Workloads) == 0 {
				t.Errorf("%s: %s has no workload", name, e.Definition.Name)
			}
		}
		target, _ := ir.Target("h200")
		for _, b := range []int{1, 4} {
			p, err := schedule.Lower(cfg, target, schedule.Default(), schedule.LowerOptions{Pos: 127, B: b})
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range p.Tasks {
				if !covered[task.Op] {
					t.Errorf("%s (batch %d): the lowering emits %s, no Definition covers it", name, b, task.Op)
				}
			}
		}
		if !names[StepName(name, cfg)] {
			t.Errorf("%s: no decode-step Definition", name)
		}
	}
}

func TestExportSharesSquareProjections(t *testing.T) {
	cfg, _ := model.Preset("llama-8b")
	out, err := Export("llama-8b", cfg, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e.Definition.Name == "gemm_n4096_k4096" {
			if !slices.Equal(e.Roles, []string{RoleQProj, RoleOProj}) {
				t.Errorf("gemm_n4096_k4096 roles %v, want q_proj and o_proj", e.Roles)
			}
			return
		}
	}
	t.Fatal("no gemm_n4096_k4096 for llama-8b")
}

// amk's own op types are known to the validator: an export draws no
// warning about its op_type.
func TestExportDrawsNoOpTypeWarning(t *testing.T) {
	cfg, err := model.Preset("small")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Export("small", cfg, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		for _, p := range Validate(e.Definition) {
			if p.Field == "op_type" {
				t.Errorf("%s: %s", e.Definition.Name, p)
			}
		}
	}
}
