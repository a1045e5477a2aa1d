package kernels

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// Knob is one compile-time -D macro of the CUDA sources and its search
// space. The kernels read each macro when it is defined and fall back to the
// same default otherwise, so the default variant equals a build without -D.
type Knob struct {
	Name     string  // knob name (ScheduleConfig.kernel_knobs key, Loop-1 variant key)
	Macro    string  // the -D macro
	Default  int64   // value when absent
	Choices  []int64 // values the searches draw from (Default included)
	Min, Max int64   // validated range; a build refuses anything outside it
	Multiple int64   // when > 1 the value must be a multiple of it
	Ops      []ir.Op // opcodes whose kernels read the macro (nil: every kernel)
	Scope    string  // "search": tuned by Loop 1/2; "config": filled from the ScheduleConfig; "fixed": set by the operator
	Note     string
}

// Knob scopes.
const (
	ScopeSearch = "search"
	ScopeConfig = "config"
	ScopeFixed  = "fixed"
)

var gemvOps = []ir.Op{ir.OpGEMVTile, ir.OpFUSED}

var knobSpace = []Knob{
	// No 512 (or larger) choice: one resident block of 512 threads caps a thread at
	// 65536/512 = 128 registers, while the VM kernel and the fused/GEMV entry kernels need
	// 200-255, so such a build spills (nvcc 11.8, sm_90: 240/536 B in amk_megakernel), which
	// the nvcc check forbids; the VM refuses threads_per_block=512 anyway (schedule.Space).
	{Name: "threads", Macro: "AMK_THREADS", Default: 256, Choices: []int64{128, 256},
		Min: 64, Max: 1024, Multiple: 32, Scope: ScopeConfig,
		Note: "block size every entry kernel is built for (__launch_bounds__); the VM takes it from ScheduleConfig.threads_per_block, kernel tuning tunes it"},
	{Name: "cols_per_warp", Macro: "AMK_GEMV_COLS_PER_WARP", Default: 1, Choices: []int64{1, 2, 4},
		Min: 1, Max: 16, Ops: gemvOps, Scope: ScopeSearch,
		Note: "weight rows one warp streams at once in the register GEMV path (x reuse, memory-level parallelism)"},
	{Name: "kunroll", Macro: "AMK_GEMV_KUNROLL", Default: 2, Choices: []int64{1, 2, 4},
		Min: 1, Max: 16, Ops: gemvOps, Scope: ScopeSearch,
		Note: "16-byte weight vectors each lane has in flight per row in the register GEMV path"},
	{Name: "cpasync", Macro: "AMK_GEMV_CPASYNC", Default: 1, Choices: []int64{0, 1},
		Min: 0, Max: 1, Ops: gemvOps, Scope: ScopeSearch,
		Note: "stream GEMV weights through a per-warp cp.async shared-memory ring (sm_80+; falls back to registers when the ring does not fit)"},
	{Name: "cpa_stages", Macro: "AMK_GEMV_CPA_STAGES", Default: 4, Choices: []int64{2, 3, 4},
		Min: 1, Max: 16, Ops: gemvOps, Scope: ScopeSearch,
		Note: "depth of the cp.async ring (chunks in flight per row)"},
	{Name: "cpa_cols", Macro: "AMK_GEMV_CPASYNC_COLS", Default: 2, Choices: []int64{2, 4},
		Min: 1, Max: 16, Ops: gemvOps, Scope: ScopeSearch,
		Note: "weight rows one warp streams at once in the cp.async path"},
	{Name: "qc", Macro: "AMK_QGEMV_COLS", Default: 2, Choices: []int64{1, 2, 4},
		Min: 1, Max: 8, Ops: []ir.Op{ir.OpGEMVTile}, Scope: ScopeSearch,
		Note: "weight rows one warp streams at once in the int8/int4 dequant-fused GEMV"},
	{Name: "ring_stages", Macro: "AMK_RING_STAGES", Default: 0, Choices: []int64{0, 8, 12},
		Min: 0, Max: 32, Ops: gemvOps, Scope: ScopeSearch,
		Note: "streaming weight ring (kernels/cuda/ring.cuh): slots per warp of a per-SM shared-memory ring that streams every fp GEMV/FUSED tile's weights across task ends and dependency waits, issued ahead of the counters; 0 = off (the per-tile cp.async ring)"},
	{Name: "ring_tile", Macro: "AMK_RING_TILE_BYTES", Default: 2048, Choices: []int64{1024, 2048},
		Min: 512, Max: 8192, Multiple: 512, Ops: gemvOps, Scope: ScopeSearch,
		Note: "bytes of one ring slot (a piece of one weight row); the ring is warps x ring_stages x ring_tile bytes per SM"},
	{Name: "ring_bulk", Macro: "AMK_RING_BULK", Default: 1, Choices: []int64{1},
		Min: 0, Max: 1, Ops: gemvOps, Scope: ScopeFixed,
		Note: "1: on sm_90 built with nvcc >= 12 the ring copies with cp.async.bulk (TMA) + mbarrier; 0 (or an older nvcc/arch): per-lane cp.async"},
	{Name: "watchdog_ns", Macro: "AMK_WATCHDOG_NS", Default: 1_000_000_000, Choices: []int64{1_000_000_000},
		Min: 1_000_000, Max: 10_000_000_000, Scope: ScopeFixed,
		Note: "default budget of one counter wait before the device watchdog aborts the launch (amk_program_t.watchdog_ns overrides it per launch); keep it below the driver/OS watchdog"},
}

// KnobSpace returns the -D knobs of the CUDA sources with their search space.
// The slice is a copy; callers may keep it.
func KnobSpace() []Knob {
	out := make([]Knob, len(knobSpace))
	for i, k := range knobSpace {
		k.Choices = append([]int64(nil), k.Choices...)
		k.Ops = append([]ir.Op(nil), k.Ops...)
		out[i] = k
	}
	return out
}

// LookupKnob finds a knob by name or by macro.
func LookupKnob(nameOrMacro string) (Knob, bool) {
	for _, k := range knobSpace {
		if k.Name == nameOrMacro || k.Macro == nameOrMacro {
			return k, true
		}
	}
	return Knob{}, false
}

// Check reports whether v is a legal value of the knob.
func (k Knob) Check(v int64) error {
	if v < k.Min || v > k.Max {
		return fmt.Errorf("knob %s (%s) = %d is out of the validated range [%d, %d]", k.Name, k.Macro, v, k.Min, k.Max)
	}
	if k.Multiple > 1 && v%k.Multiple != 0 {
		return fmt.Errorf("knob %s (%s) = %d is not a multiple of %d", k.Name, k.Macro, v, k.Multiple)
	}
	return nil
}

// Variant is one build of the CUDA sources: knob name -> value.
type Variant map[string]int64

// DefaultVariant has every knob at its default.
func DefaultVariant() Variant {
	v := Variant{}
	for _, k := range knobSpace {
		v[k.Name] = k.Default
	}
	return v
}

// Normalize returns a copy with every knob present (defaults filled) after
// checking names and ranges. Keys may be knob names or macros.
func (v Variant) Normalize() (Variant, error) {
	out := DefaultVariant()
	keys := make([]string, 0, len(v))
	for key := range v {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		k, ok := LookupKnob(key)
		if !ok {
			return nil, fmt.Errorf("unknown kernel knob %q", key)
		}
		if err := k.Check(v[key]); err != nil {
			return nil, err
		}
		out[k.Name] = v[key]
	}
	return out, nil
}

// Threads is the block size of the variant (AMK_THREADS).
func (v Variant) Threads() int { return int(v.get("threads")) }

func (v Variant) get(name string) int64 {
	if x, ok := v[name]; ok {
		return x
	}
	k, _ := LookupKnob(name)
	return k.Default
}

// Defines renders the normalised variant as nvcc -D flags sorted by macro.
// Every knob is spelled out, defaults included, so that the flags (and the
// build cache key) name the full knob set (docs/spec/rules.md R8).
func (v Variant) Defines() ([]string, error) {
	n, err := v.Normalize()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(knobSpace))
	for _, k := range knobSpace {
		out = append(out, "-D"+k.Macro+"="+strconv.FormatInt(n[k.Name], 10))
	}
	sort.Strings(out)
	return out, nil
}

// String is the canonical "name=value,..." form (sorted by name).
func (v Variant) String() string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.FormatInt(v[k], 10)
	}
	return strings.Join(parts, ",")
}

var reDefineFlag = regexp.MustCompile(`^-D([A-Z][A-Z0-9_]{0,63})=(-?[0-9]{1,19})$`)

// ParseDefine strictly parses one "-DMACRO=INTEGER" flag against the
// allow-list: the macro must be a knob of KnobSpace and the value an integer
// in its validated range. Anything else (shell metacharacters, spaces,
// missing values, unknown macros) is an error, so no untrusted text ever
// reaches the compiler's argv.
func ParseDefine(flag string) (macro string, value int64, err error) {
	m := reDefineFlag.FindStringSubmatch(flag)
	if m == nil {
		return "", 0, fmt.Errorf("malformed define %q: want -DAMK_NAME=INTEGER", flag)
	}
	k, ok := LookupKnob(m[1])
	if !ok || k.Macro != m[1] {
		return "", 0, fmt.Errorf("define %q: macro %s is not an allowed kernel knob", flag, m[1])
	}
	value, err = strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("define %q: %v", flag, err)
	}
	// One spelling per value ("01", "-0" and "+1" are refused), so that a
	// variant's flags, its cache key and its name cannot disagree.
	if strconv.FormatInt(value, 10) != m[2] {
		return "", 0, fmt.Errorf("define %q: write the value as %d", flag, value)
	}
	if err := k.Check(value); err != nil {
		return "", 0, err
	}
	return k.Macro, value, nil
}

// VariantFromDefines parses -D flags into a variant (a macro given twice is an error).
func VariantFromDefines(flags []string) (Variant, error) {
	v := Variant{}
	for _, f := range flags {
		macro, val, err := ParseDefine(f)
		if err != nil {
			return nil, err
		}
		k, _ := LookupKnob(macro)
		if _, dup := v[k.Name]; dup {
			return nil, fmt.Errorf("define %s given twice", macro)
		}
		v[k.Name] = val
	}
	return v, nil
}
