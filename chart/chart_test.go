package chart

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/trial"
)

var keep = flag.String("chart.keep", "", "also write the test's pictures to this directory")

func sample() campaign.WakeUp {
	w := campaign.WakeUp{Campaign: "small / h200", GPU: "h200", LatencyKind: trial.KindPredicted, BoundUS: new(40.0), BaselineUS: new(400.0)}
	best := 400.0
	for i := 1; i <= 30; i++ {
		lat := 400 - float64(i*i%97)*3
		kept := lat < best
		if kept {
			best = lat
		}
		w.Trajectory = append(w.Trajectory, campaign.TrajectoryPoint{Experiment: i, Trial: i, LatencyUS: new(lat), Kept: kept, BestUS: new(best)})
	}
	return w
}

func TestTrajectoryBothFormats(t *testing.T) {
	svg, err := TrajectorySVG(sample())
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	for _, want := range []string{"<svg", "streamed-bytes floor", "best so far", "experiment", "µs",
		"small / h200 — latency predicted by the cost model, best against", ">latency predicted by the cost model</text>"} {
		if !strings.Contains(s, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	data, err := Draw(Trajectory(sample()), PNG, TrajectorySize)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != TrajectorySize.W || b.Dy() != TrajectorySize.H {
		t.Errorf("PNG is %v, want %v", b, TrajectorySize)
	}
	if *keep != "" {
		_ = os.WriteFile(*keep+"/trajectory.svg", svg, 0o644)
		_ = os.WriteFile(*keep+"/trajectory.png", data, 0o644)
	}
}

// TestTrajectorySaysWhatItsLatenciesAre: a measured campaign's chart names
// the GPU in its title and axis, a predicted one says so.
func TestTrajectorySaysWhatItsLatenciesAre(t *testing.T) {
	w := sample()
	w.LatencyKind = trial.KindMeasuredGPU
	svg, err := TrajectorySVG(w)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(svg); strings.Count(s, "latency measured on h200") != 2 || strings.Contains(s, "predicted") {
		t.Errorf("a measured campaign's chart: title and axis should say \"latency measured on h200\" and never \"predicted\"")
	}
}

// TestLegendBesideTheData: every legend entry lies right of everything the
// plot drew before it (the data, the grid, the axes), so no legend text
// covers a curve, whatever font the viewer substitutes.
func TestLegendBesideTheData(t *testing.T) {
	svg, err := TrajectorySVG(sample())
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	before, _, ok := strings.Cut(s, ">best so far</text>")
	if !ok {
		t.Fatal("no legend")
	}
	textX := regexp.MustCompile(`<text x="([0-9.]+)"[^<]*>best so far</text>`).FindStringSubmatch(s)
	if textX == nil {
		t.Fatal("the legend's text has no x")
	}
	legendX, _ := strconv.ParseFloat(textX[1], 64)
	// Every x of every path drawn before the legend, skipping the page's
	// background (the first path, the whole image).
	paths := regexp.MustCompile(`<path d="([^"]*)"`).FindAllStringSubmatchIndex(before, -1)
	num := regexp.MustCompile(`[ML]([0-9.]+),`)
	maxX := 0.0
	for _, p := range paths[1:] {
		for _, m := range num.FindAllStringSubmatch(s[p[2]:p[3]], -1) {
			x, _ := strconv.ParseFloat(m[1], 64)
			maxX = max(maxX, x)
		}
	}
	if legendX <= maxX {
		t.Errorf("the legend's text starts at x=%.1f, inside what the plot drew (up to x=%.1f)", legendX, maxX)
	}
}

// TestKnobSliceLabelsTheKnobsValues: the slice plot names the knob and
// its values on the x axis; without a slice it still draws and says why.
func TestKnobSliceLabelsTheKnobsValues(t *testing.T) {
	w := sample()
	w.KnobSlice = &campaign.KnobSlice{Knob: "sm_assignment", Values: []string{`"round_robin"`, `"load_balance"`},
		Points: []campaign.SlicePoint{{Value: 0, LatencyUS: 120}, {Value: 1, LatencyUS: 100}, {Value: 1, LatencyUS: 110}, {Value: 7, LatencyUS: 1}}}
	svg, err := KnobSliceSVG(w)
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	for _, want := range []string{"latency predicted by the cost model against sm_assignment", "round_robin", "load_balance", "fastest per value"} {
		if !strings.Contains(s, want) {
			t.Errorf("the slice plot lacks %q", want)
		}
	}
	w.KnobSlice = nil
	if svg, err := KnobSliceSVG(w); err != nil || !strings.Contains(string(svg), "not enough correct trials yet") {
		t.Errorf("no slice: %v", err)
	}
}

func TestEmptyAndBadInput(t *testing.T) {
	if _, err := TrajectorySVG(campaign.WakeUp{Campaign: "new"}); err != nil {
		t.Fatalf("a campaign with no latency yet: %v", err)
	}
	if _, err := Draw(Chart{}, "gif", TrajectorySize); err == nil {
		t.Error("an unknown format was accepted")
	}
	if _, err := Grid("", "", nil, 1, PNG, TrajectorySize); err == nil {
		t.Error("no charts was accepted")
	}
}

func TestGrid(t *testing.T) {
	charts := []Chart{Trajectory(sample()), {Title: "ratio", Unit: "%", Lines: []Line{{Points: []Point{{0, 50}, {1, 60}}}}}, Trajectory(sample())}
	data, err := Grid("title", "subtitle", charts, 2, PNG, Size{W: 400, H: 300})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() < 600 {
		t.Errorf("grid is %v, want 800 wide and over 600 high", b)
	}
}

// A workload campaign's report draws the latency against KV length beside
// the trajectory: baseline, best and the floor at each evaluated position.
func TestReportDrawsLatencyAgainstKVLength(t *testing.T) {
	w := sample()
	if _, ok := ContextLatency(w); ok {
		t.Fatal("a campaign without per-position figures got a KV-length chart")
	}
	at := func(kv int, lat, floor float64) trial.PositionVerdict {
		return trial.PositionVerdict{Pos: kv - 1, KVLen: kv, LatencyUS: new(lat), BoundUS: new(floor)}
	}
	w.Workload = &trial.Workload{PromptLens: []int{2048}, GenLen: 128, Batch: 1}
	w.BaselinePositions = []trial.PositionVerdict{at(2049, 990, 105), at(2112, 1010, 106), at(2176, 1030, 106)}
	w.BestPositions = []trial.PositionVerdict{at(2049, 190, 105), at(2112, 192, 106), at(2176, 194, 106)}
	c, ok := ContextLatency(w)
	if !ok || len(c.Lines) != 3 || len(c.Lines[1].Points) != 3 || c.Lines[2].Points[0] != (Point{2049, 105}) {
		t.Fatalf("chart %+v", c)
	}
	svg, err := ReportSVG(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"KV length", "2048-token prompt", "best so far", "baseline (default schedule)"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the report picture lacks %q", want)
		}
	}
	if *keep != "" {
		if err := os.WriteFile(*keep+"/report-context.svg", svg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
