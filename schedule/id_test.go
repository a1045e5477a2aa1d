package schedule

import (
	"testing"

	"github.com/amk-dev/amk/ir"
)

func TestScheduleIDVectors(t *testing.T) {
	if got := ConfigID(DefaultConfig()); got != "sch_c3af28020e" {
		t.Errorf("ConfigID(default) = %s, want sch_c3af28020e", got)
	}
	dataclass := ir.ScheduleConfig{SMAssignment: ir.SMAssignment{Policy: "load_balance"}, PipeliningDepth: 2,
		PageAllocation: "graph_color", ThreadsPerBlock: 256}
	if got := ConfigID(dataclass); got != "sch_d74fe3be8d" {
		t.Errorf("ConfigID(ScheduleConfig()) = %s, want sch_d74fe3be8d", got)
	}
	if got := Default().ID(); got != "sch_c92f8dd66d" {
		t.Errorf("Default().ID() = %s, want sch_c92f8dd66d", got)
	}
}
