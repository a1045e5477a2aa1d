package fib

import (
	"fmt"
	"slices"
	"strings"

	"github.com/amk-dev/amk/flywheel"
)

// CampaignRun is what a campaign's ledger holds that its Traces need: the
// whole-step verdicts of its results.tsv and the campaign's latency kind,
// environment, decode position and last event time.
type CampaignRun struct {
	Kind      string
	Target    string
	Env       flywheel.Env
	Pos       int
	Timestamp string
	Rows      []flywheel.Row
}

// CampaignTraces exports a campaign's schedule verdicts as Traces of the
// model's decode-step Definition, on a workload of batch 1 at the
// campaign's position (amk campaigns are single-stream). It returns the
// Traces, their Solutions, the workload, and how many PASS rows without a
// latency were left out.
func CampaignTraces(exported []Exported, run CampaignRun) ([]Trace, []*Solution, Workload, int, error) {
	var step *Definition
	for _, e := range exported {
		if e.Definition.OpType == "decode_step" {
			step = e.Definition
		}
	}
	if step == nil {
		return nil, nil, Workload{}, 0, fmt.Errorf("no decode-step Definition among the exported ones")
	}
	maxSeq := step.ConstAxes()["max_seq_len"]
	if run.Pos < 0 || int64(run.Pos) >= maxSeq {
		return nil, nil, Workload{}, 0, fmt.Errorf("campaign position %d outside the model's %d cache rows", run.Pos, maxSeq)
	}
	w := Workload{Axes: Ordered[int64]{{"batch_size", 1}}}
	for _, in := range step.Inputs {
		spec := InputSpec{Type: InputRandom}
		if in.Name == "pos" {
			spec = InputSpec{Type: InputScalar, Value: run.Pos}
		}
		w.Inputs = append(w.Inputs, Named[InputSpec]{in.Name, spec})
	}
	w.UUID = workloadUUID(step.Name+fmt.Sprintf("|pos=%d", run.Pos), w.Axes)
	var rows []flywheel.Row
	for _, r := range run.Rows {
		if r.Loop == flywheel.LoopSchedule || r.Loop == "" {
			rows = append(rows, r)
		}
	}
	traces, sols, skipped, err := TracesFromFacts(step, w, RunInfo{Kind: run.Kind, Target: run.Target, Env: run.Env,
		Timestamp: run.Timestamp}, FactsFromRows(rows))
	return traces, sols, w, skipped, err
}

// CaseModel is the preset Loop-1 cuts its fixed cases from (kernels/tune).
const CaseModel = "small"

// loop1Cases says, per Loop-1 op, which exported Definition its fixed case
// is an instance of and at which batch and KV length (kernels/tune: the
// lm_head tiles for the projections, batch 4 for GEMM_TILE, kv_len 128 at
// position 127, the first rope group is the queries').
var loop1Cases = map[string]struct {
	role         string
	batch, kvLen int64
}{
	"rmsnorm":        {RoleNorm, 1, 0},
	"gemv_tile":      {RoleLMHead, 1, 0},
	"gemm_tile":      {RoleLMHead, 4, 0},
	"attention_tile": {RoleAttention, 1, 128},
	"rope":           {RoleRope, 1, 0},
	"kv_append":      {RoleKVAppend, 1, 0},
	"silu_mul":       {RoleSwiGLU, 1, 0},
	"add":            {RoleResidual, 1, 0},
	"embed":          {RoleEmbed, 1, 0},
}

// InstructionTraces exports Loop-1 results rows (loop=instruction, model
// inst:<op>) as Traces of the Definitions of the `small` export their
// cases are cut from. Loop 1 times kernels on a GPU only, so its rows are
// measured-gpu. Rows of ops without a Definition (attention_combine) are
// counted in unmatched.
func InstructionTraces(exported []Exported, target string, env flywheel.Env, timestamp string, rows []flywheel.Row) (traces []Trace, sols []*Solution, skipped, unmatched int, err error) {
	byOp := map[string][]flywheel.Row{}
	var order []string
	for _, r := range rows {
		if r.Loop != flywheel.LoopInstruction {
			continue
		}
		op, ok := strings.CutPrefix(r.Model, "inst:")
		if !ok {
			unmatched++
			continue
		}
		if _, seen := byOp[op]; !seen {
			order = append(order, op)
		}
		byOp[op] = append(byOp[op], r)
	}
	for _, op := range order {
		c, ok := loop1Cases[op]
		var e *Exported
		for i := range exported {
			if ok && containsString(exported[i].Roles, c.role) {
				e = &exported[i]
			}
		}
		if e == nil {
			unmatched += len(byOp[op])
			continue
		}
		var w *Workload
		for i := range e.Workloads {
			ax := e.Workloads[i].Axes
			b, _ := ax.Get(e.Definition.VarAxes()[0])
			kv, hasKV := ax.Get("kv_len")
			if b == c.batch && (!hasKV || kv == c.kvLen) {
				w = &e.Workloads[i]
			}
		}
		if w == nil {
			unmatched += len(byOp[op])
			continue
		}
		t, s, sk, err := TracesFromFacts(e.Definition, *w, RunInfo{Kind: KindMeasuredGPU, Target: target, Env: env,
			Timestamp: timestamp}, FactsFromRows(byOp[op]))
		if err != nil {
			return nil, nil, 0, 0, fmt.Errorf("kernel-tuning rows of %s: %w", op, err)
		}
		traces, sols, skipped = append(traces, t...), append(sols, s...), skipped+sk
	}
	return traces, sols, skipped, unmatched, nil
}

func containsString(xs []string, s string) bool {
	return slices.Contains(xs, s)
}
