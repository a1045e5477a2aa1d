package chart

import (
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

var (
	contextFigure = flag.String("chart.context-figure", "", "write the docs picture of predicted time per decode step against KV length to this SVG file")
	contextPoints = flag.String("chart.context-points", "", "comma-separated NAME=config.json schedule points the picture draws beside the default")
	contextModel  = flag.String("chart.context-model", "small", "model preset of the picture")
	contextGPU    = flag.String("chart.context-gpu", "h200", "GPU target of the picture")
	contextMax    = flag.Int("chart.context-max", 2176, "the largest KV length drawn")
)

// TestContextFigure draws, for docs/results/search.md, the cost model's
// time per decode step (predicted, batch 1) of schedule points across KV
// lengths 1..chart.context-max, beside the reference default and the
// streamed-bytes floor: why a schedule tuned at one context length is not
// the one for another. It runs only with -chart.context-figure.
func TestContextFigure(t *testing.T) {
	if *contextFigure == "" {
		t.Skip("run with -chart.context-figure FILE")
	}
	cfg, err := model.Preset(*contextModel)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = trial.ContextConfig(cfg, *contextModel, trial.Workload{PromptLens: []int{0}, GenLen: *contextMax}); err != nil {
		t.Fatal(err)
	}
	tg, err := ir.Target(*contextGPU)
	if err != nil {
		t.Fatal(err)
	}
	type series struct {
		name  string
		point schedule.Point
	}
	all := []series{{"reference default", schedule.Default()}}
	for nv := range strings.SplitSeq(*contextPoints, ",") {
		name, path, ok := strings.Cut(nv, "=")
		if !ok {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, err := schedule.ParsePoint(data)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		all = append(all, series{name, p})
	}
	c := Chart{Title: fmt.Sprintf("%s on %s: predicted time per decode step against KV length", cfg.Name, tg.Name),
		XLabel: "KV length (rows read by the step)", YLabel: "time per step (predicted)", Unit: " µs"}
	var floor []Point
	for i, s := range all {
		var pts []Point
		for kv := 1; kv <= *contextMax; kv += 32 {
			prog, err := schedule.Lower(cfg, tg, s.point, schedule.LowerOptions{Pos: kv - 1})
			if err != nil {
				t.Fatalf("%s at kv %d: %v", s.name, kv, err)
			}
			pts = append(pts, Point{float64(kv), schedule.Predict(prog, tg, s.point).PredictedUS})
			if i == 0 {
				floor = append(floor, Point{float64(kv), tg.BandwidthBoundUS(prog.StreamedBytes())})
			}
		}
		var col color.Color = Grey
		if i > 0 {
			col = Palette[(i-1)%len(Palette)]
		}
		c.Lines = append(c.Lines, Line{Name: s.name, Points: pts, Color: col})
		t.Logf("%s: %.1f us at kv 1, %.1f us at kv %d", s.name, pts[0].Y, pts[len(pts)-1].Y, int(pts[len(pts)-1].X))
	}
	c.Lines = append(c.Lines, Line{Name: "streamed-bytes floor", Points: floor, Color: Red, Dashed: true})
	svg, err := Draw(c, SVG, TrajectorySize)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Clean(*contextFigure), svg, 0o644); err != nil {
		t.Fatal(err)
	}
}
