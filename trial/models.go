package trial

import (
	"context"
	"fmt"
	"sync"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
)

// WeightSeed is the seed of generated weights: every evaluator of a fleet
// generates the same weights for the same model.
const WeightSeed = 0

// DefaultCheckBytes bounds the in-memory weights (float32 values) of the
// model whose numerics are checked on the CPU. A bigger model is checked on a
// truncation to its first layers — the lowering of every layer is the same,
// so the schedule's correctness is exercised — and the verdict says so.
const DefaultCheckBytes int64 = 6 << 30

// LoadedModel is a model with its weights and cached oracle results.
type LoadedModel struct {
	// Config is the model as requested (used for lowering and timing).
	Config model.Config
	// Check is the model whose numerics are verified: Config itself, or a
	// layer truncation when Config is too big for the host.
	Check   model.Config
	Weights model.Weights
	Source  string // "seeded init" or the safetensors path
	// WeightsNote says where seeded weights came from: "generated",
	// "generated, stored in FILE" or "mapped from FILE" (UseWeightsDir).
	WeightsNote string

	mu     sync.Mutex
	oracle map[[2]int][]float32 // (token, pos) -> eager logits
}

// Truncated reports whether correctness is checked on fewer layers.
func (m *LoadedModel) Truncated() bool { return m.Check.NLayers != m.Config.NLayers }

// ModelCache shares loaded models, weights and oracle logits between the
// trials of one process. It is safe for concurrent use.
type ModelCache struct {
	checkBytes int64
	mu         sync.Mutex
	weightsDir string // see UseWeightsDir
	models     map[string]*modelEntry
}

type modelEntry struct {
	once sync.Once
	m    *LoadedModel
	err  error
}

// NewModelCache returns a cache; checkBytes <= 0 means DefaultCheckBytes.
func NewModelCache(checkBytes int64) *ModelCache {
	if checkBytes <= 0 {
		checkBytes = DefaultCheckBytes
	}
	return &ModelCache{checkBytes: checkBytes, models: map[string]*modelEntry{}}
}

// Get loads (once) the model named by a preset or a config.json path, with
// seeded weights or the given safetensors file.
func (c *ModelCache) Get(name, weightsPath string) (*LoadedModel, error) {
	key := name + "\x00" + weightsPath
	c.mu.Lock()
	e, ok := c.models[key]
	if !ok {
		e = &modelEntry{}
		c.models[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.m, e.err = c.load(name, weightsPath) })
	return e.m, e.err
}

func (c *ModelCache) load(name, weightsPath string) (*LoadedModel, error) {
	cfg, err := model.Load(name)
	if err != nil {
		return nil, err
	}
	check := cfg
	params := cfg.WeightBytes() / int64(max(1, cfg.DType.Bits()/8))
	perLayer := params / int64(max(1, cfg.NLayers))
	for check.NLayers > 1 && (params-int64(cfg.NLayers-check.NLayers)*perLayer)*4 > c.checkBytes {
		check.NLayers--
	}
	m := &LoadedModel{Config: cfg, Check: check, oracle: map[[2]int][]float32{}}
	if weightsPath != "" {
		if m.Truncated() {
			return nil, fmt.Errorf("model %s needs %d MB of float32 weights, over the %d MB check budget; real weights cannot be truncated", cfg.Name, params*4>>20, c.checkBytes>>20)
		}
		m.Weights, err = model.LoadSafetensors(weightsPath, cfg)
		m.Source = weightsPath
	} else {
		m.Weights, m.WeightsNote, err = c.seededWeights(check)
		m.Source = "seeded init"
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// HistoryToken is the token fed at an earlier position p when a trial checks
// a later position: a fixed, documented sequence so every evaluator agrees.
func HistoryToken(token, p, vocab int) int32 { return int32((token*7 + p*13 + 1) % vocab) }

type checkResult struct {
	cmp    vm.Comparison
	logits []float32
	notes  []string
}

// check runs the reference VM on the program and compares its logits with
// the eager oracle's at (token, pos).
func (m *LoadedModel) check(ctx context.Context, prog *ir.Program, token, pos int, target *ir.GpuTarget, point schedule.Point) (*checkResult, error) {
	res := &checkResult{}
	if token < 0 || token >= m.Check.Vocab {
		return nil, fmt.Errorf("token %d outside the vocabulary [0, %d)", token, m.Check.Vocab)
	}
	want, err := m.eagerLogits(token, pos)
	if err != nil {
		return nil, fmt.Errorf("eager oracle: %w", err)
	}
	if m.Truncated() {
		res.notes = append(res.notes, fmt.Sprintf("correctness checked on the first %d of %d layers (same per-layer schedule; full weights exceed the host check budget)", m.Check.NLayers, m.Config.NLayers))
	}
	got, err := runReference(ctx, m, target, point, token, pos, prog)
	if err != nil {
		return nil, err
	}
	res.logits = got
	res.cmp = vm.Compare(got, want, m.Check.Vocab, m.Check.DType)
	return res, nil
}

// eagerLogits returns (and caches) the oracle's logits: the eager pass fed
// the history tokens at positions < pos and token at pos.
func (m *LoadedModel) eagerLogits(token, pos int) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.oracle[[2]int{token, pos}]; ok {
		return l, nil
	}
	e, err := model.NewEager(m.Check, m.Weights)
	if err != nil {
		return nil, err
	}
	var logits []float32
	for p := 0; p <= pos; p++ {
		tok := HistoryToken(token, p, m.Check.Vocab)
		if p == pos {
			tok = int32(token)
		}
		if logits, err = e.Step(tok, p); err != nil {
			return nil, err
		}
	}
	m.oracle[[2]int{token, pos}] = logits
	return logits, nil
}

// runReference executes positions 0..pos through the reference VM, carrying
// the KV caches, and returns the logits at pos. The program for the checked
// model is the trial's own program unless the check model is truncated.
func runReference(ctx context.Context, m *LoadedModel, target *ir.GpuTarget, point schedule.Point, token, pos int, prog *ir.Program) ([]float32, error) {
	var kv map[string]*tensor.Tensor
	var logits []float32
	for p := 0; p <= pos; p++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		step := prog
		if m.Truncated() || p != pos {
			var err error
			if step, err = schedule.Lower(m.Check, target, point, schedule.LowerOptions{Pos: p}); err != nil {
				return nil, fmt.Errorf("lowering the check model at pos %d: %w", p, err)
			}
			if rep := validate.Validate(step); !rep.OK {
				return nil, fmt.Errorf("check program rejected at pos %d: %s", p, rep.Reason(3))
			}
		}
		tok := HistoryToken(token, p, m.Check.Vocab)
		if p == pos {
			tok = int32(token)
		}
		out, err := RunStep(step, m.Weights, tok, p, kv)
		if err != nil {
			return nil, err
		}
		kv = out.KV
		logits = out.Logits
	}
	return logits, nil
}

// StepResult is one reference-VM decode step.
type StepResult struct {
	Logits []float32
	KV     map[string]*tensor.Tensor
}

// RunStep runs one lowered decode step in the reference VM with the given
// weights, token, position and carried KV caches.
func RunStep(prog *ir.Program, w model.Weights, token int32, pos int, kv map[string]*tensor.Tensor) (*StepResult, error) {
	machine, err := vm.New(prog, vm.Options{})
	if err != nil {
		return nil, err
	}
	if err := machine.BindWeights(w); err != nil {
		return nil, err
	}
	inputs := map[string]int32{schedule.TokenInput: token, schedule.PosInput: int32(pos), schedule.ReshapeInput: 0}
	for name, val := range inputs {
		t, _ := tensor.FromInts(ir.I32, []int{1}, []int32{val})
		if err := machine.Bind(name, t); err != nil {
			return nil, err
		}
	}
	if err := machine.BindKV(kv); err != nil {
		return nil, err
	}
	res, err := machine.Run()
	if err != nil {
		return nil, err
	}
	out := &StepResult{KV: res.KV}
	if t := res.Outputs[schedule.LogitsOutput]; t != nil {
		out.Logits = t.Floats()
	}
	if out.Logits == nil {
		return nil, fmt.Errorf("the program produced no %q output", schedule.LogitsOutput)
	}
	return out, nil
}
