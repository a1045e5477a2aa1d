package chart

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/amk-dev/amk/campaign"
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
