package trial

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strings"
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

// DefaultCheckBytes bounds the in-memory weights, at their stored dtype
// (model.Config WeightBytes: 2 bytes a value for bf16 and fp16, 4 for f32), of
// the model whose numerics are checked on the CPU. A bigger model is checked on a
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
	Source  string // "seeded init" or the safetensors files, comma-separated
	// Files are the safetensors files the weights were read from (--weights,
	// or every file of the checkpoint beside the model's config); nil for
	// seeded weights.
	Files []string
	// FromCheckpoint says Files are the model's own checkpoint
	// (model.Checkpoint), found without a weights argument.
	FromCheckpoint bool
	// WeightsNote says where seeded weights came from: "generated",
	// "generated, stored in FILE" or "mapped from FILE" (UseWeightsDir).
	WeightsNote string

	mu     sync.Mutex
	oracle map[oracleKey][]float32 // eager logits

	// unmap releases the memory map Weights views (nil when the weights
	// are in memory); the cache calls it once no trial uses the model.
	unmap func()
	// admitted is the host memory reserved for the model
	// (WithHostAdmission), given back when the cache lets it go.
	admitted int64
}

// Truncated reports whether correctness is checked on fewer layers.
func (m *LoadedModel) Truncated() bool { return m.Check.NLayers != m.Config.NLayers }

// ModelCache shares loaded models, weights and oracle logits between the
// trials of one process. Models that no trial uses are kept, least recently
// used first out, while their weights total at most the keep budget; a
// model let go releases its weights (unmaps a mapped weights file). It is
// safe for concurrent use.
type ModelCache struct {
	checkBytes int64
	keepBytes  int64
	probe      MemoryProbe
	host       HostAdmission
	mu         sync.Mutex
	weightsDir string // see UseWeightsDir
	models     map[string]*modelEntry
	uses       uint64 // counts releases: the order of last use
}

// modelEntry loads one model once; a load that was cancelled is not kept,
// so the next trial loads it again.
type modelEntry struct {
	mu  sync.Mutex
	m   *LoadedModel
	err error

	// Guarded by ModelCache.mu: the trials using the model now (a model
	// handed out by Get counts as used for good), and when it was last
	// released.
	users    int
	lastUsed uint64
}

// NewModelCache returns a cache; checkBytes <= 0 means DefaultCheckBytes.
// It keeps unused models while their weights total at most checkBytes (as
// much as the one model whose numerics are checked may hold; see
// KeepUnused).
func NewModelCache(checkBytes int64) *ModelCache {
	if checkBytes <= 0 {
		checkBytes = DefaultCheckBytes
	}
	return &ModelCache{checkBytes: checkBytes, keepBytes: checkBytes, models: map[string]*modelEntry{}}
}

// KeepUnused sets how many bytes of weights the cache keeps for models no
// trial uses (0: none; a model is released as soon as its last trial
// ends). It returns c; call it before first use.
func (c *ModelCache) KeepUnused(bytes int64) *ModelCache {
	c.keepBytes = max(bytes, 0)
	return c
}

// WithMemoryProbe makes the cache refuse, with a *MemoryError and before
// allocating anything, a model whose EstimateMemory host figure exceeds
// what probe reports available, once it has released every model no trial
// uses (least recently used first, probing again after each) and the model
// still does not fit. It returns c; call it before first use.
func (c *ModelCache) WithMemoryProbe(probe MemoryProbe) *ModelCache {
	c.probe = probe
	return c
}

// WithHostAdmission makes the memory check of WithMemoryProbe one for the
// whole host: a model is admitted only when it fits in what the probe
// reports less what the host's other evaluators were admitted and have not
// allocated yet, and the cache holds the reservation until it lets the
// model go. It returns c; call it before first use.
func (c *ModelCache) WithHostAdmission(host HostAdmission) *ModelCache {
	c.host = host
	return c
}

// CheckBytes is the cache's check budget (see DefaultCheckBytes).
func (c *ModelCache) CheckBytes() int64 { return c.checkBytes }

// Get loads (once) the model named by a preset, a config.json path or a
// HuggingFace id, with the given safetensors file, else the checkpoint
// beside the model's config (model.Checkpoint: model.safetensors or every
// shard of model.safetensors.index.json), else seeded weights. The model
// stays loaded for the life of the cache.
func (c *ModelCache) Get(name, weightsPath string) (*LoadedModel, error) {
	return c.GetContext(context.Background(), name, weightsPath)
}

// GetContext is Get that stops generating weights when ctx ends; the
// cancelled load is forgotten, not cached.
func (c *ModelCache) GetContext(ctx context.Context, name, weightsPath string) (*LoadedModel, error) {
	m, _, err := c.acquire(ctx, name, weightsPath)
	return m, err // never released: kept for good
}

// acquire is GetContext for one trial: the model is kept until release is
// called (once, after the trial's last use of the model and its weights),
// and then kept only while the keep budget allows.
func (c *ModelCache) acquire(ctx context.Context, name, weightsPath string) (m *LoadedModel, release func(), err error) {
	key := name + "\x00" + weightsPath
	c.mu.Lock()
	e, ok := c.models[key]
	if !ok {
		e = &modelEntry{}
		c.models[key] = e
	}
	e.users++
	c.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { c.release(e) }) }
	m, err = e.load(ctx, c, name, weightsPath)
	if err != nil {
		release()
		return nil, func() {}, err
	}
	return m, release, nil
}

// load loads the entry's model once.
func (e *modelEntry) load(ctx context.Context, c *ModelCache, name, weightsPath string) (*LoadedModel, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m != nil || e.err != nil {
		return e.m, e.err
	}
	m, err := c.load(ctx, name, weightsPath)
	var memErr *MemoryError
	if ctx.Err() != nil || errors.As(err, &memErr) {
		if m != nil {
			c.free(m)()
		}
		return nil, err // not kept: memory may be free next time
	}
	e.m, e.err = m, err
	return m, err
}

// release ends one trial's use of e's model, then lets go of the least
// recently used unused models until the rest fit the keep budget.
func (c *ModelCache) release(e *modelEntry) {
	var frees []func()
	c.mu.Lock()
	e.users--
	c.uses++
	e.lastUsed = c.uses
	idle, kept := c.idleLocked()
	for _, key := range idle {
		if kept <= c.keepBytes {
			break
		}
		kept -= c.models[key].m.Weights.Bytes()
		frees = append(frees, c.dropLocked(key))
	}
	c.mu.Unlock()
	for _, free := range frees {
		free()
	}
}

// releaseOldestIdle lets go of the least recently used model no trial uses,
// for a load that does not fit the host's memory; false when there is none.
func (c *ModelCache) releaseOldestIdle() bool {
	c.mu.Lock()
	idle, _ := c.idleLocked()
	if len(idle) == 0 {
		c.mu.Unlock()
		return false
	}
	free := c.dropLocked(idle[0])
	c.mu.Unlock()
	free()
	return true
}

// idleLocked returns the keys of the loaded models no trial uses, least
// recently used first, and the bytes of their weights. c.mu is held.
func (c *ModelCache) idleLocked() ([]string, int64) {
	var kept int64
	var idle []string
	for key, x := range c.models {
		if x.m == nil || x.users > 0 {
			continue
		}
		kept += x.m.Weights.Bytes()
		idle = append(idle, key)
	}
	slices.SortFunc(idle, func(a, b string) int { return cmp.Compare(c.models[a].lastUsed, c.models[b].lastUsed) })
	return idle, kept
}

// dropLocked forgets key's model and returns what frees its weights, to be
// called once c.mu is released: the unmap of mapped weights; for weights
// in memory, a collection that returns them to the system (so that a
// memory probe sees them gone). c.mu is held.
func (c *ModelCache) dropLocked(key string) func() {
	m := c.models[key].m
	delete(c.models, key)
	return c.free(m)
}

// free returns what lets go of m's weights and gives its host memory
// reservation back, once the weights are gone.
func (c *ModelCache) free(m *LoadedModel) func() {
	return func() {
		if m.unmap != nil {
			m.unmap()
		} else {
			debug.FreeOSMemory()
		}
		if m.admitted > 0 && c.host != nil {
			c.host.Release(m.admitted)
		}
	}
}

func (c *ModelCache) load(ctx context.Context, name, weightsPath string) (*LoadedModel, error) {
	cfg, err := model.Load(name)
	if err != nil {
		return nil, err
	}
	files, fromCheckpoint, err := weightFiles(name, weightsPath)
	if err != nil {
		return nil, err
	}
	if len(files) > 0 { // a quantised checkpoint states its scheme
		if cfg, err = model.WithCheckpointQuantization(cfg, files); err != nil {
			return nil, err
		}
	}
	check := checkConfig(cfg, c.checkBytes)
	m := &LoadedModel{Config: cfg, Check: check, oracle: map[oracleKey][]float32{}}
	if c.probe != nil {
		need := EstimateMemory(cfg, false, c.checkBytes).Host
		for {
			avail, source, perr := c.probe()
			if perr != nil {
				break
			}
			fits, others := need <= avail, int64(0)
			if c.host != nil {
				fits, others = c.host.Admit(need, avail)
			}
			if fits {
				if c.host != nil {
					m.admitted = need
				}
				break
			}
			if !c.releaseOldestIdle() {
				return nil, &MemoryError{Model: cfg.Name, Need: need, Available: max(avail-others, 0), Source: source, HeldByOthers: others}
			}
		}
	}
	if len(files) > 0 {
		// The check model's layers only: a model over the check budget is
		// checked on its first layers, with their real weights.
		m.Weights, err = model.LoadSafetensorsShards(files, check)
		m.Source, m.Files, m.FromCheckpoint = strings.Join(files, ", "), files, fromCheckpoint
	} else {
		m.Weights, m.WeightsNote, m.unmap, err = c.seededWeights(ctx, check.Float())
		m.Source = "seeded init"
		if err == nil && check.Quant.On() { // amk's own float weights, quantised (docs/spec/quantization.md)
			m.Weights, err = model.QuantizeContext(ctx, check, m.Weights)
			m.WeightsNote += ", quantised " + check.Quant.String() + " in memory"
			if err != nil && m.unmap != nil {
				m.unmap()
				m.unmap = nil
			}
		}
	}
	if err != nil {
		c.free(m)()
		return nil, err
	}
	return m, nil
}

// HistoryToken is the token fed at an earlier position p when a trial checks
// a later position: a fixed, documented sequence so every evaluator agrees.
func HistoryToken(token, p, vocab int) int32 { return int32((token*7 + p*13 + 1) % vocab) }

type checkResult struct {
	cmp    vm.Comparison
	top1   float64 // summed over the batch until finish
	logits []float32
	notes  []string
	token  int // the token the check decoded (row 0's; RowToken for the others)
}

// RowToken is the token sequence r of a batch decodes at the checked
// position: sequence 0 decodes the spec's token, sequence r the next r-th
// one (mod vocab), each with its own history (HistoryToken of its token).
func RowToken(token, r, vocab int) int { return (token + r) % vocab }

// check runs the reference VM on the program (batch sequences, b >= 1) and
// compares each sequence's logits with the eager oracle's for that
// sequence: the batch is correct when every sequence is; max_abs_err is the
// largest over the batch and top1_agreement the mean.
func (m *LoadedModel) check(ctx context.Context, prog *ir.Program, token, pos, b int, target *ir.GpuTarget, point schedule.Point) (*checkResult, error) {
	res := &checkResult{}
	if token < 0 || token >= m.Check.Vocab {
		return nil, fmt.Errorf("token %d outside the vocabulary [0, %d)", token, m.Check.Vocab)
	}
	if m.Truncated() {
		res.notes = append(res.notes, fmt.Sprintf("correctness checked on the first %d of %d layers (same per-layer schedule; full weights exceed the host check budget)", m.Check.NLayers, m.Config.NLayers))
	}
	got, err := runReference(ctx, m, target, point, token, pos, b, prog)
	if err != nil {
		return nil, err
	}
	res.logits = got
	v := m.Check.Vocab
	if len(got) != b*v {
		return nil, fmt.Errorf("the program produced %d logits, want %d x %d", len(got), b, v)
	}
	for r := range b {
		want, err := m.eagerLogits(ctx, RowToken(token, r, v), pos)
		if err != nil {
			return nil, fmt.Errorf("eager oracle: %w", err)
		}
		res.merge(r, vm.Compare(got[r*v:(r+1)*v], want, v, m.Check.DType))
	}
	res.finish(b)
	return res, nil
}

// merge folds sequence r's comparison into the batch's: the first failing
// sequence decides the verdict (and says which it was), max_abs_err is the
// largest and top1_agreement summed (finish averages it).
func (res *checkResult) merge(r int, c vm.Comparison) {
	res.top1 += c.Top1Agreement
	switch {
	case r == 0:
		res.cmp = c
	case !c.Pass && res.cmp.Pass:
		c.Reason = fmt.Sprintf("batch sequence %d: %s", r, c.Reason)
		c.MaxAbsErr = max(c.MaxAbsErr, res.cmp.MaxAbsErr)
		res.cmp = c
	default:
		res.cmp.MaxAbsErr = max(res.cmp.MaxAbsErr, c.MaxAbsErr)
	}
}

// finish averages top1_agreement over the b sequences and notes a batch.
func (res *checkResult) finish(b int) {
	res.cmp.Top1Agreement = res.top1 / float64(b)
	if b > 1 {
		res.notes = append(res.notes, fmt.Sprintf("batch B=%d: each sequence checked against its own eager decode", b))
	}
}

// oracleKey names a cached eager result: the token decoded at pos, after
// the history tokens or (seeded) from sequence seq's seeded KV cache.
type oracleKey struct {
	token, pos int
	seeded     bool
	seq        int
}

// eagerLogits returns (and caches) the oracle's logits: the eager pass fed
// the history tokens at positions < pos and token at pos.
func (m *LoadedModel) eagerLogits(ctx context.Context, token, pos int) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := oracleKey{token: token, pos: pos}
	if l, ok := m.oracle[key]; ok {
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
		if logits, err = e.StepContext(ctx, tok, p); err != nil {
			return nil, err
		}
	}
	m.oracle[key] = logits
	return logits, nil
}

// seededEagerLogits returns (and caches) the oracle's logits of one step:
// token at pos, from sequence seq's seeded KV cache (seededPrefill) of the
// check model lowered with context cfg.
func (m *LoadedModel) seededEagerLogits(ctx context.Context, check model.Config, token, pos, seq int) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := oracleKey{token: token, pos: pos, seeded: true, seq: seq}
	if l, ok := m.oracle[key]; ok {
		return l, nil
	}
	e, err := model.NewEager(check, m.Weights)
	if err != nil {
		return nil, err
	}
	if err := e.Prefill(seededPrefill(&check, seq, pos)); err != nil {
		return nil, err
	}
	logits, err := e.StepContext(ctx, int32(token), pos)
	if err != nil {
		return nil, err
	}
	m.oracle[key] = logits
	return logits, nil
}

// maxCheckTokenTries bounds the tokens tried for a position's check token.
const maxCheckTokenTries = 16

// checkToken is the token a workload trial checks at pos, from the spec's
// token: the first of token, token+1, ... (mod vocab; maxCheckTokenTries at
// most, then token itself) for which the eager oracle's logits, started
// from the seeded cache, have a clear top one in every batch row — its lead
// over the runner-up more than the dtype's tolerance there (vm.Tolerance:
// atol + rtol·|max|). At a near tie a correct schedule, summing in another
// order, may pick the other top within the tolerance and fail the top-1
// rule; a clear top makes the rule test the schedule, not the tie. It
// depends only on the oracle, so every evaluator checks the same token.
func (m *LoadedModel) checkToken(ctx context.Context, check model.Config, token, pos, b int) (int, error) {
	atol, rtol := vm.Tolerance(check.DType)
	for try := range maxCheckTokenTries {
		cand := (token + try) % check.Vocab
		clear := true
		for r := 0; r < b && clear; r++ {
			logits, err := m.seededEagerLogits(ctx, check, RowToken(cand, r, check.Vocab), pos, r)
			if err != nil {
				return 0, err
			}
			top, second := math.Inf(-1), math.Inf(-1)
			for _, v := range logits {
				switch x := float64(v); {
				case x > top:
					top, second = x, top
				case x > second:
					second = x
				}
			}
			clear = top-second > atol+rtol*math.Abs(top)
		}
		if clear {
			return cand, nil
		}
	}
	return token, nil
}

// checkModel is the check model (m.Check) with cfg's context.
func (m *LoadedModel) checkModel(cfg model.Config) model.Config {
	check := m.Check
	check.MaxSeq = cfg.MaxSeq
	return check
}

// checkSeeded runs one decode step at pos of b sequences through the
// reference VM, from the seeded KV cache, and compares each sequence's
// logits with the eager oracle's from the same cache; cfg is the model as
// the trial lowers it (its context) and prog its program at pos, run as it
// is unless the check model is a truncation. It also returns the KV caches
// the step started from, for a device to start from the same.
func (m *LoadedModel) checkSeeded(ctx context.Context, cfg model.Config, prog *ir.Program, token, pos, b int, target *ir.GpuTarget, point schedule.Point) (*checkResult, map[string]*tensor.Tensor, error) {
	if token < 0 || token >= m.Check.Vocab {
		return nil, nil, fmt.Errorf("token %d outside the vocabulary [0, %d)", token, m.Check.Vocab)
	}
	check := m.checkModel(cfg)
	token, err := m.checkToken(ctx, check, token, pos, b)
	if err != nil {
		return nil, nil, fmt.Errorf("eager oracle: %w", err)
	}
	res := &checkResult{token: token}
	if m.Truncated() {
		res.notes = append(res.notes, fmt.Sprintf("correctness checked on the first %d of %d layers (same per-layer schedule; full weights exceed the host check budget)", m.Check.NLayers, m.Config.NLayers))
		if prog, err = schedule.Lower(check, target, point, schedule.LowerOptions{Pos: pos, B: b}); err != nil {
			return nil, nil, fmt.Errorf("lowering the check model at pos %d: %w", pos, err)
		}
		if rep := validate.Validate(prog); !rep.OK {
			return nil, nil, fmt.Errorf("check program rejected at pos %d: %s", pos, rep.Reason(3))
		}
	}
	v := check.Vocab
	toks := make([]int32, b)
	for r := range toks {
		toks[r] = int32(RowToken(token, r, v))
	}
	kv := seededKV(&check, pos, b)
	start := make(map[string]*tensor.Tensor, len(kv))
	for name, t := range kv {
		start[name] = t.Clone() // the step appends to the caches it runs on
	}
	out, err := runBatchStep(ctx, prog, m.Weights, toks, pos, kv)
	if err != nil {
		return nil, nil, err
	}
	got := out.Logits
	if len(got) != b*v {
		return nil, nil, fmt.Errorf("the program produced %d logits, want %d x %d", len(got), b, v)
	}
	res.logits = got
	for r := range b {
		want, err := m.seededEagerLogits(ctx, check, RowToken(token, r, v), pos, r)
		if err != nil {
			return nil, nil, fmt.Errorf("eager oracle: %w", err)
		}
		res.merge(r, vm.Compare(got[r*v:(r+1)*v], want, v, check.DType))
	}
	res.finish(b)
	return res, start, nil
}

// runReference executes positions 0..pos through the reference VM, carrying
// the KV caches, and returns the logits at pos. The program for the checked
// model is the trial's own program unless the check model is truncated.
func runReference(ctx context.Context, m *LoadedModel, target *ir.GpuTarget, point schedule.Point, token, pos, b int, prog *ir.Program) ([]float32, error) {
	kv, err := referenceHistory(ctx, m, target, point, token, pos, b)
	if err != nil {
		return nil, err
	}
	step := prog
	if m.Truncated() {
		if step, err = lowerCheckStep(m, target, point, pos, b); err != nil {
			return nil, err
		}
	}
	toks := make([]int32, b)
	for r := range toks {
		toks[r] = int32(RowToken(token, r, m.Check.Vocab))
	}
	out, err := runBatchStep(ctx, step, m.Weights, toks, pos, kv)
	if err != nil {
		return nil, err
	}
	return out.Logits, nil
}

// referenceHistory runs positions 0..pos-1 of the check model under point
// through the reference VM — sequence r decoding the history tokens of
// RowToken(token, r) — and returns the KV caches they leave (nil for pos
// 0): what a decode step at pos starts from.
func referenceHistory(ctx context.Context, m *LoadedModel, target *ir.GpuTarget, point schedule.Point, token, pos, b int) (map[string]*tensor.Tensor, error) {
	var kv map[string]*tensor.Tensor
	for p := range pos {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		step, err := lowerCheckStep(m, target, point, p, b)
		if err != nil {
			return nil, err
		}
		toks := make([]int32, b)
		for r := range toks {
			toks[r] = HistoryToken(RowToken(token, r, m.Check.Vocab), p, m.Check.Vocab)
		}
		out, err := runBatchStep(ctx, step, m.Weights, toks, p, kv)
		if err != nil {
			return nil, err
		}
		kv = out.KV
	}
	return kv, nil
}

// lowerCheckStep lowers and validates the check model at pos.
func lowerCheckStep(m *LoadedModel, target *ir.GpuTarget, point schedule.Point, pos, b int) (*ir.Program, error) {
	step, err := schedule.Lower(m.Check, target, point, schedule.LowerOptions{Pos: pos, B: b})
	if err != nil {
		return nil, fmt.Errorf("lowering the check model at pos %d: %w", pos, err)
	}
	if rep := validate.Validate(step); !rep.OK {
		return nil, fmt.Errorf("check program rejected at pos %d: %s", pos, rep.Reason(3))
	}
	return step, nil
}

// StepResult is one reference-VM decode step.
type StepResult struct {
	Logits []float32
	KV     map[string]*tensor.Tensor
}

// RunStep runs one lowered decode step in the reference VM with the given
// weights, token, position and carried KV caches.
func RunStep(prog *ir.Program, w model.Weights, token int32, pos int, kv map[string]*tensor.Tensor) (*StepResult, error) {
	return RunBatchStep(prog, w, []int32{token}, pos, kv)
}

// RunBatchStep is RunStep for a program lowered with B = len(tokens):
// sequence r decodes tokens[r], all at position pos; the logits are B rows.
func RunBatchStep(prog *ir.Program, w model.Weights, tokens []int32, pos int, kv map[string]*tensor.Tensor) (*StepResult, error) {
	return runBatchStep(context.Background(), prog, w, tokens, pos, kv)
}

// runBatchStep is RunBatchStep that stops between tasks once ctx ends.
func runBatchStep(ctx context.Context, prog *ir.Program, w model.Weights, tokens []int32, pos int, kv map[string]*tensor.Tensor) (*StepResult, error) {
	machine, err := vm.New(prog, vm.Options{Done: ctx.Done()})
	if err != nil {
		return nil, err
	}
	if err := machine.BindWeights(w); err != nil {
		return nil, err
	}
	b := len(tokens)
	positions, rows := make([]int32, b), make([]int32, b)
	for r := range rows {
		positions[r], rows[r] = int32(pos), int32(r)
	}
	inputs := map[string][]int32{schedule.TokenInput: tokens, schedule.PosInput: positions, schedule.ReshapeInput: rows}
	for name, vals := range inputs {
		t, err := tensor.FromInts(ir.I32, []int{b}, vals)
		if err != nil {
			return nil, err
		}
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
