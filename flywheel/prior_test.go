package flywheel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
)

var (
	toyShape  = Shape{Hidden: 256, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 64, Intermediate: 512, Vocab: 1024}
	toy2Shape = Shape{Hidden: 256, NLayers: 2, NHeads: 4, NKVHeads: 2, HeadDim: 64, Intermediate: 512, Vocab: 1024}
	bigShape  = Shape{Hidden: 4096, NLayers: 32, NHeads: 32, NKVHeads: 8, HeadDim: 128, Intermediate: 14336, Vocab: 128256}
)

func rec(t *testing.T, model string, shape Shape, gpu, kind string, pct float64, sched string) Record {
	t.Helper()
	v, err := pyjson.Parse([]byte(sched))
	if err != nil {
		t.Fatal(err)
	}
	return Record{Model: model, GPU: gpu, Regime: RegimeSingle, Correctness: CorrectPass,
		LatencyUS: pct, BoundUS: 100, PctOfRoofline: pct, Schedule: v, LatencyKind: kind,
		Shape: shape, ShapeSource: ShapeFromConfig}
}

func nTile(p schedule.Point) int {
	v, _ := p.Config.Tile("gemv", "N_tile")
	return v
}

func TestWarmStartNearestShape(t *testing.T) {
	corpus := []Record{
		rec(t, "big", bigShape, "h200", KindPredicted, 150, `{"tiling": {"gemv": {"N_tile": 16}}}`),
		rec(t, "toy2", toy2Shape, "h200", KindPredicted, 900, `{"tiling": {"gemv": {"N_tile": 128}}}`),
		rec(t, "toy", toyShape, "h200", KindPredicted, 800, `{"tiling": {"gemv": {"N_tile": 256}}}`),
		rec(t, "toy", toyShape, "h200", KindPredicted, 700, `{"tiling": {"gemv": {"N_tile": 32}}}`),
		// Same point again (only reserved knobs differ): deduplicated.
		rec(t, "toy", toyShape, "h200", KindPredicted, 750, `{"tiling": {"gemv": {"N_tile": 32}, "attention": {"kv_block": 64}}, "page_allocation": "linear"}`),
		// tpb 512 is no longer legal: dropped.
		rec(t, "toy", toyShape, "h200", KindPredicted, 10, `{"tiling": {"gemv": {"N_tile": 512}}, "threads_per_block": 512}`),
		// Malformed schedule: dropped.
		rec(t, "toy", toyShape, "h200", KindPredicted, 5, `{"pipelining_depth": "deep"}`),
		// Another GPU, another kind: never used.
		rec(t, "toy", toyShape, "h100", KindPredicted, 1, `{"tiling": {"gemv": {"N_tile": 48}}}`),
		rec(t, "toy", toyShape, "h200", KindMeasuredGPU, 1, `{"tiling": {"gemv": {"N_tile": 48}}}`),
	}
	seeds := WarmStart(toyShape, "h200", KindPredicted, corpus, 3)
	var got []string
	for _, s := range seeds {
		got = append(got, fmt.Sprintf("%s:%d", s.Model, nTile(s.Point)))
	}
	// toy rows first by pct (32 at 700, 256 at 800), then toy2 (distance log(3/2) < 1); big is beyond the radius.
	if want := "[toy:32 toy:256 toy2:128]"; fmt.Sprint(got) != want {
		t.Fatalf("seeds %v, want %s", got, want)
	}
	for _, s := range seeds {
		if s.ID != s.Point.ID() {
			t.Fatalf("seed id %s != point id %s", s.ID, s.Point.ID())
		}
	}
	// A shape far from everything falls back to all rows (big is then nearest).
	far := WarmStart(Shape{Hidden: 8192, NLayers: 80, NHeads: 64, NKVHeads: 8, HeadDim: 128, Intermediate: 28672, Vocab: 128256}, "h200", KindPredicted, corpus, 1)
	if len(far) != 1 || far[0].Model != "big" {
		t.Fatalf("far seeds: %+v", far)
	}
	if s := WarmStart(toyShape, "h200", KindMeasuredGPU, corpus, 3); len(s) != 1 || nTile(s[0].Point) != 48 {
		t.Fatalf("measured seeds: %+v", s)
	}
	if s := WarmStart(toyShape, "nope", KindPredicted, corpus, 3); s != nil {
		t.Fatalf("unknown gpu gave seeds: %+v", s)
	}
}

func TestWarmStartProjectsDeviceKnobs(t *testing.T) {
	// A predicted (CPU) campaign cannot use kernel knobs or smem: they reset.
	corpus := []Record{rec(t, "toy", toyShape, "h200", KindPredicted, 100,
		`{"tiling": {"gemv": {"N_tile": 32}}, "smem_bytes_per_block": 16384, "kernel_knobs": {"cols_per_warp": 4, "cpasync": 0}}`)}
	s := WarmStart(toyShape, "h200", KindPredicted, corpus, 1)
	if len(s) != 1 {
		t.Fatal("no seed")
	}
	want := schedule.Default()
	want.Config.SetTile("gemv", "N_tile", 32)
	if s[0].ID != want.ID() {
		t.Fatalf("seed %s is not the projected point %s", pyjson.Compact(s[0].Point.Value(), false), pyjson.Compact(want.Normalize().Value(), false))
	}
}

func randomExamples(n int, seed uint64) ([]Example, []schedule.Point) {
	rng := rand.New(rand.NewPCG(seed, 7))
	target := mustTarget("h200")
	var ex []Example
	var pts []schedule.Point
	for range n {
		p := schedule.Random(rng, target, "cpu")
		for _, k := range schedule.Space(target, "cpu") { // the reference's knobs only: a landscape of N_tile
			if k.Path != schedule.PathNTile && k.Path != schedule.PathNPartitions && k.Path != schedule.PathSMAssignment &&
				k.Path != schedule.PathDepth && k.Path != schedule.PathTPB {
				p.SetKnob(k.Path, k.Default)
			}
		}
		nt := float64(nTile(p))
		pct := 1000 * (1 + math.Abs(math.Log2(nt)-5))
		ex = append(ex, ExampleOf(toyShape, p, pct))
		pts = append(pts, p)
	}
	return ex, pts
}

func TestRankerUntrainedIsIdentity(t *testing.T) {
	ex, pts := randomExamples(MinExamplesToRank-1, 1)
	r := NewRanker(ex)
	if r.Trained() {
		t.Fatal("trained below the minimum")
	}
	got := r.Rank(toyShape, pts)
	for i := range pts {
		if got[i].ID() != pts[i].ID() {
			t.Fatal("untrained ranker reordered candidates")
		}
	}
	if !math.IsInf(r.Score(toyShape, pts[0]), 1) {
		t.Fatal("untrained score is not +Inf")
	}
	var nilRanker *Ranker
	if nilRanker.Trained() || len(nilRanker.Rank(toyShape, pts)) != len(pts) {
		t.Fatal("nil ranker")
	}
}

func TestRankerLearnsAndIsDeterministic(t *testing.T) {
	ex, _ := randomExamples(200, 2)
	r1, r2 := NewRanker(ex), NewRanker(ex)
	if !r1.Trained() || r1.Size() != 200 {
		t.Fatalf("trained=%v size=%d", r1.Trained(), r1.Size())
	}
	_, cands := randomExamples(40, 3)
	a, b := r1.Rank(toyShape, cands), r2.Rank(toyShape, cands)
	for i := range a {
		if a[i].ID() != b[i].ID() {
			t.Fatal("two rankers on the same examples disagree")
		}
	}
	for i := range cands {
		if s1, s2 := r1.Score(toyShape, cands[i]), r1.Score(toyShape, cands[i]); s1 != s2 {
			t.Fatal("score not repeatable")
		}
	}
	// The landscape's optimum is N_tile 32: the top candidate must be one.
	if nt := nTile(a[0]); nt != 32 {
		t.Fatalf("best-ranked N_tile %d, want 32", nt)
	}
	// Inverse-distance weighting of log(pct) stays within the examples' range.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, e := range ex {
		lo, hi = min(lo, e.Pct), max(hi, e.Pct)
	}
	for _, c := range cands {
		if s := r1.Score(toyShape, c); s < lo*(1-1e-12) || s > hi*(1+1e-12) {
			t.Fatalf("score %v outside the examples' range [%v, %v]", s, lo, hi)
		}
	}
}
