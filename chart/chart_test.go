package chart

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/trial"
)

var keep = flag.String("chart.keep", "", "also write the test's pictures to this directory")

func sample() campaign.WakeUp {
	w := campaign.WakeUp{Campaign: "small / h200", BoundUS: new(40.0), BaselineUS: new(400.0)}
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
	for _, want := range []string{"<svg", "streamed-bytes floor", "best so far", "experiment", "µs"} {
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
