package tune

import (
	"slices"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
)

func knobNames(ks []kernels.Knob) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Name)
	}
	return out
}

func TestKnobsPerOp(t *testing.T) {
	if got := knobNames(Knobs(ir.OpRMSNORM)); !slices.Equal(got, []string{"threads"}) {
		t.Fatalf("rmsnorm knobs %v", got)
	}
	want := []string{"threads", "cols_per_warp", "kunroll", "cpasync", "cpa_stages", "cpa_cols"}
	if got := knobNames(Knobs(ir.OpGEMVTile)); !slices.Equal(got, want) {
		t.Fatalf("gemv knobs %v, want %v", got, want)
	}
}

func TestProposalsSingleKnob(t *testing.T) {
	got := Proposals(ir.OpADD, 10)
	labels := []string{}
	for _, v := range got {
		labels = append(labels, Label(v))
	}
	if !slices.Equal(labels, []string{"default", "threads=128"}) {
		t.Fatalf("add proposals %v", labels)
	}
	if n := len(Proposals(ir.OpADD, 2)); n != 2 {
		t.Fatalf("budget 2 gave %d proposals", n)
	}
}

func TestProposalsGEMV(t *testing.T) {
	all := Proposals(ir.OpGEMVTile, 1000)
	// cpasync=1: threads x stages x ring cols; cpasync=0: threads x cols x kunroll.
	if len(all) != 2*3*2+2*3*3 {
		t.Fatalf("%d distinct GEMV variants, want 30", len(all))
	}
	if len(all[0]) != 0 {
		t.Fatalf("variant 0 is not the defaults: %v", all[0])
	}
	seen := map[string]bool{}
	prev := 0
	for _, v := range all {
		key := v.String()
		if seen[key] {
			t.Fatalf("duplicate variant %s", key)
		}
		seen[key] = true
		if len(v) < prev {
			t.Fatalf("variants not ordered by distance from the defaults: %v after %d", v, prev)
		}
		prev = len(v)
		if c, ok := v["cpasync"]; ok && c == 0 {
			if _, bad := v["cpa_stages"]; bad {
				t.Fatalf("ring knob set with cpasync=0: %v", v)
			}
		} else if _, bad := v["kunroll"]; bad {
			t.Fatalf("register knob set on the cp.async path: %v", v)
		}
		if _, err := v.Normalize(); err != nil {
			t.Fatalf("%v: %v", v, err)
		}
	}
	first := []string{}
	for _, v := range Proposals(ir.OpGEMVTile, 6) {
		first = append(first, Label(v))
	}
	want := []string{"default", "threads=128", "cpasync=0", "cpa_stages=2", "cpa_stages=3", "cpa_cols=4"}
	if !slices.Equal(first, want) {
		t.Fatalf("first GEMV proposals %v, want %v", first, want)
	}
}
