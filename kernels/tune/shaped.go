package tune

import (
	"fmt"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// Shape places a case at a chosen shape instead of the fixed CaseModel cut:
// Model is a (possibly synthetic) model whose decode-step lowering at
// batch Batch and position Pos holds the op at the wanted dimensions, and
// Label names the task group to cut (the task label, or its prefix before
// a tile or shard suffix: "lm_head" takes every "lm_head[tN]" tile).
// FlashInfer-Bench workloads become Loop-1 cases this way (fib.CaseSpec).
type Shape struct {
	Model      model.Config
	Batch      int
	Pos        int
	Label      string
	Partitions int // split-KV factor for attention; 1 or 0 = none
}

// NewShapedCase builds op's case at s.
func NewShapedCase(op ir.Op, target *ir.GpuTarget, s Shape) (*Case, error) {
	if _, err := ParseOp(op.String()); err != nil {
		return nil, err
	}
	if dt := s.Model.DType; dt != ir.F32 && dt != ir.F16 && dt != ir.BF16 {
		return nil, fmt.Errorf("kernel-tuning cases are fp32, fp16 or bf16, not %s", dt)
	}
	if err := s.Model.Validate(); err != nil {
		return nil, err
	}
	if s.Pos < 0 || s.Pos >= s.Model.MaxSeq {
		return nil, fmt.Errorf("position %d outside the model's %d cache rows", s.Pos, s.Model.MaxSeq)
	}
	point := schedule.Default()
	point.Config.SetTile("attention", "n_partitions", max(1, s.Partitions))
	opts := schedule.LowerOptions{Pos: s.Pos, B: max(1, s.Batch)}
	pick := func(p *ir.Program) []int {
		var group []int
		for i := range p.Tasks {
			t := &p.Tasks[i]
			if t.Op == op && (t.Label == s.Label || strings.HasPrefix(t.Label, s.Label+"[") || strings.HasPrefix(t.Label, s.Label+".s")) {
				group = append(group, i)
			}
		}
		return group
	}
	return buildCase(op, target, s.Model, point, opts, pick)
}
