package gpu

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/trial"
)

// Weight source kinds the child's WeightProvider resolves.
const (
	SourceSeeded      = "seeded"
	SourceSafetensors = "safetensors"
)

// modelSpec is how a model travels to the launcher child inside
// launch.WeightSource.Model: the full shape (model.Config drops its dtype
// from JSON, so it rides beside it).
type modelSpec struct {
	Config model.Config `json:"config"`
	DType  string       `json:"dtype"`
}

// encodeModel renders cfg for WeightSource.Model.
func encodeModel(cfg model.Config) string {
	data, _ := json.Marshal(modelSpec{Config: cfg, DType: cfg.DType.String()})
	return string(data)
}

// decodeModel parses WeightSource.Model and validates the shape.
func decodeModel(s string) (model.Config, error) {
	var ms modelSpec
	if err := json.Unmarshal([]byte(s), &ms); err != nil {
		return model.Config{}, fmt.Errorf("weight source model: %w", err)
	}
	dt, err := ir.ParseDType(ms.DType)
	if err != nil {
		return model.Config{}, fmt.Errorf("weight source model: %w", err)
	}
	cfg := ms.Config
	cfg.DType = dt
	if err := cfg.Validate(); err != nil {
		return model.Config{}, fmt.Errorf("weight source model: %w", err)
	}
	return cfg, nil
}

// weightSource tells the child to build the same weights the trial's model
// cache holds: the seeded init (trial.WeightSeed) of the full model — whose
// per-tensor streams make the first layers equal to a truncated check
// model's — or the full model from the safetensors files (every shard of a
// checkpoint), whose first layers are the truncated check model's.
func weightSource(m *trial.LoadedModel) launch.WeightSource {
	if len(m.Files) > 0 {
		return launch.WeightSource{Kind: SourceSafetensors, Model: encodeModel(m.Config), Paths: m.Files}
	}
	return launch.WeightSource{Kind: SourceSeeded, Model: encodeModel(m.Config), Seed: trial.WeightSeed}
}

// variantOf maps a point's kernel knobs onto the sources' knob space. A
// knob amk's kernels do not implement is ignored with a note; a value
// outside a kernel knob's validated range is an error (the device refuses it).
func variantOf(p schedule.Point) (kernels.Variant, []string, error) {
	v := kernels.Variant{}
	var notes []string
	names := make([]string, 0, len(p.Knobs))
	for k := range p.Knobs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		val := int64(p.Knobs[name])
		k, ok := kernels.LookupKnob(name)
		if !ok || k.Scope != kernels.ScopeSearch {
			notes = append(notes, fmt.Sprintf("kernel knob %s=%d has no effect on amk's CUDA sources; ignored", name, val))
			continue
		}
		if err := k.Check(val); err != nil {
			return nil, nil, err
		}
		v[k.Name] = val
	}
	return v, notes, nil
}

// stepInputs are the IO inputs of one decode step at position pos: row r
// of the batch decodes tokens[r] (every row at pos; the reshape rows
// 0..B-1), as trial's reference VM binds them.
func stepInputs(tokens []int32, pos int) (map[string]launch.WireTensor, error) {
	b := len(tokens)
	positions, rows := make([]int32, b), make([]int32, b)
	for r := range rows {
		positions[r], rows[r] = int32(pos), int32(r)
	}
	out := map[string]launch.WireTensor{}
	for name, vals := range map[string][]int32{schedule.TokenInput: tokens, schedule.PosInput: positions, schedule.ReshapeInput: rows} {
		t, err := tensor.FromInts(ir.I32, []int{b}, vals)
		if err != nil {
			return nil, err
		}
		if out[name], err = launch.ToWire(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// batchTokens are the tokens the rows of a batch of b decode at pos of a
// trial of token: trial.RowToken's, or at an earlier position of the
// history their trial.HistoryToken.
func batchTokens(token, pos, last, b, vocab int) []int32 {
	out := make([]int32, b)
	for r := range out {
		rt := trial.RowToken(token, r, vocab)
		out[r] = int32(rt)
		if pos != last {
			out[r] = trial.HistoryToken(rt, pos, vocab)
		}
	}
	return out
}

// kvNames lists the KV cache buffers of a program.
func kvNames(p *ir.Program) []string {
	var out []string
	for i := range p.Buffers {
		if p.Buffers[i].Kind == ir.KVCache {
			out = append(out, p.Buffers[i].Name)
		}
	}
	return out
}

// sameLayout reports whether b can replace a's instruction params in place
// (launch Update, docs/spec/rules.md R28): the same buffers and the same tasks on the same
// queues, differing only in params.
func sameLayout(a, b *ir.Program) bool {
	if len(a.Buffers) != len(b.Buffers) || len(a.Tasks) != len(b.Tasks) || len(a.Counters) != len(b.Counters) {
		return false
	}
	for i := range a.Buffers {
		x, y := &a.Buffers[i], &b.Buffers[i]
		if x.Name != y.Name || x.Kind != y.Kind || x.DType != y.DType || !equalInts(x.Shape, y.Shape) {
			return false
		}
	}
	for i := range a.Tasks {
		x, y := &a.Tasks[i], &b.Tasks[i]
		if x.Op != y.Op || x.OutCounter != y.OutCounter || !equalInts(x.Inputs, y.Inputs) ||
			!equalInts(x.Outputs, y.Outputs) || smOf(x) != smOf(y) || len(x.Waits) != len(y.Waits) {
			return false
		}
		for j := range x.Waits {
			if x.Waits[j] != y.Waits[j] {
				return false
			}
		}
	}
	return true
}

func smOf(t *ir.Task) int {
	if t.SM == nil {
		return -1
	}
	return *t.SM
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
