package schedule

import (
	"crypto/sha1"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// evalSignature is everything eval produces from a point on a target and
// device, less the schedule id: the lowered program (without the config it
// records), the launch check, the cost model's prediction and, where a
// kernel is built (cuda on an NVIDIA target), the build's knobs and the
// shared memory the launch opts into.
func evalSignature(t *testing.T, model string, tg *ir.GpuTarget, dev Device, p Point, pos int, cache map[string]string) string {
	t.Helper()
	key := model + " " + tg.Name + " " + p.ID()
	sig, ok := cache[key]
	if !ok {
		prog, err := Lower(mustPreset(t, model), tg, p, LowerOptions{Pos: pos})
		if err != nil {
			sig = "lowering: " + err.Error()
		} else {
			sum := sha1.Sum([]byte(programKey(prog)))
			sig = fmt.Sprintf("program %x launch %v predicted %.6f", sum, CheckLaunch(p, tg), Predict(prog, tg, p).PredictedUS)
		}
		cache[key] = sig
	}
	if dev == DeviceCUDA && !tg.IsAMD() {
		n := p.Normalize()
		sig += fmt.Sprintf(" build %s smem %d", pyjson.Compact(knobsValue(n.Knobs), true), n.Config.SmemBytesPerBlock)
	}
	return sig
}

// spaceBases are the points each knob is moved from: the reference default,
// the device lowering's defaults, and the fully fused point with the
// streaming ring on (so that knobs acting only with others — head counters
// with the RoPE epilogue and the KV-head split, a ring slot size with the
// ring — get the chance to act).
func spaceBases() []Point {
	ring := FullyFused()
	ring.SetKnob(knobPrefix+"ring_stages", intV(8))
	return []Point{Default(), DeviceDefault(), FullyFused(), ring}
}

// TestSpaceMatchesEval derives each knob's effective flag from eval, knob by
// knob: a knob is effective on a target and device exactly when moving it
// among its choices (and its range's ends), from one of spaceBases, changes
// what eval produces there (evalSignature), at a position where split-KV can
// act. So propose's
// edit surface never lists a knob as inert that eval applies, nor the
// other way round.
func TestSpaceMatchesEval(t *testing.T) {
	const pos = 100
	for _, c := range []struct{ gpu, model string }{{"h200", "toy-2L"}, {"rtx5090", "toy-2L"}, {"mi300x", "toy-2L"}} {
		tg := mustTarget(t, c.gpu)
		cache := map[string]string{}
		for _, dev := range []Device{DeviceCPU, DeviceCUDA} {
			for _, k := range Space(tg, dev) {
				values := k.Choices
				if r := k.Range; r != nil && r.Max < math.MaxInt32 {
					values = append(slices.Clone(values), intV(r.Min), intV(r.Max))
				}
				applied := false
				for _, base := range spaceBases() {
					sigs := map[string]bool{}
					for _, v := range values {
						p := base.Clone()
						if !p.SetKnob(k.Path, v) {
							t.Fatalf("%s/%s: %s cannot take %s", c.gpu, dev, k.Path, valueKey(v))
						}
						sigs[evalSignature(t, c.model, tg, dev, p, pos, cache)] = true
					}
					if len(sigs) > 1 {
						applied = true
						break
					}
				}
				if applied != k.Effective {
					t.Errorf("%s on %s/%s: %s is listed effective=%v, but eval applies it: %v", c.model, c.gpu, dev, k.Path, k.Effective, applied)
				}
			}
		}
	}
}

// setPath writes v at a knob's path of a config dict ("a.b.c" nests).
func setPath(cfg *pyjson.Value, path string, v pyjson.Value) {
	head, rest, nested := strings.Cut(path, ".")
	if !nested {
		cfg.Set(head, v)
		return
	}
	inner, ok := cfg.Get(head)
	if !ok || inner.Kind != pyjson.Object {
		inner = pyjson.ObjectValue()
	}
	setPath(&inner, rest, v)
	cfg.Set(head, inner)
}

// TestSpaceChoicesAndRangesParse holds the published surface to the parser:
// every choice of every knob, written at its path into a config dict, parses
// to the point SetKnob makes; every range's ends parse; and a value just
// outside a range is rejected, or normalised to the end it is clamped to.
func TestSpaceChoicesAndRangesParse(t *testing.T) {
	parse := func(path string, v pyjson.Value) (Point, error) {
		cfg := Default().Value()
		setPath(&cfg, path, v)
		return PointFromValue(cfg)
	}
	for _, gpu := range []string{"h200", "mi300x", "t4"} {
		tg := mustTarget(t, gpu)
		for _, dev := range []Device{DeviceCPU, DeviceCUDA} {
			for _, k := range Space(tg, dev) {
				for _, v := range k.Choices {
					got, err := parse(k.Path, v)
					if err != nil {
						t.Errorf("%s/%s: choice %s=%s does not parse: %v", gpu, dev, k.Path, valueKey(v), err)
						continue
					}
					want := Default()
					want.SetKnob(k.Path, v)
					if got.Normalize().ID() != want.Normalize().ID() {
						t.Errorf("%s/%s: %s=%s parses to %s, SetKnob makes %s", gpu, dev, k.Path, valueKey(v), got.Normalize().ID(), want.Normalize().ID())
					}
				}
				if k.Range == nil {
					continue
				}
				for _, end := range []int{k.Range.Min, k.Range.Max} {
					if _, err := parse(k.Path, intV(end)); err != nil {
						t.Errorf("%s/%s: %s range end %d does not parse: %v", gpu, dev, k.Path, end, err)
					}
				}
				if k.Range.Min > math.MinInt32 {
					if p, err := parse(k.Path, intV(k.Range.Min-1)); err == nil && CheckLaunch(p, tg) == nil {
						t.Errorf("%s/%s: %s=%d below the range [%d, %d] is accepted", gpu, dev, k.Path, k.Range.Min-1, k.Range.Min, k.Range.Max)
					}
				}
				if k.Range.Max < math.MaxInt32 {
					over, err := parse(k.Path, intV(k.Range.Max+1))
					if err != nil || CheckLaunch(over, tg) != nil {
						continue // rejected
					}
					top, _ := parse(k.Path, intV(k.Range.Max))
					if over.Normalize().ID() != top.Normalize().ID() {
						t.Errorf("%s/%s: %s=%d above the range [%d, %d] is accepted and not clamped to %d", gpu, dev, k.Path, k.Range.Max+1, k.Range.Min, k.Range.Max, k.Range.Max)
					}
				}
			}
		}
	}
}

// Applies is the normalisation's own view: a knob applies to a point
// exactly when some choice of it changes the normalised point.
func TestAppliesMatchesNormalize(t *testing.T) {
	tg := mustTarget(t, "h200")
	space := Space(tg, DeviceCUDA)
	for _, base := range append(spaceBases(), DeviceDefault(), Default()) {
		for _, k := range space {
			if !k.Effective {
				continue
			}
			changes := false
			for _, v := range k.Choices {
				q := base.Clone()
				q.SetKnob(k.Path, v)
				changes = changes || q.Normalize().ID() != base.Normalize().ID()
			}
			if changes != base.Applies(k.Path) {
				t.Errorf("%s at %s: a choice changes the point: %v; Applies says %v", k.Path, base.ID(), changes, base.Applies(k.Path))
			}
		}
	}
}
