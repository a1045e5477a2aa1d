package runner

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/amk-dev/amk/campaign"
)

// TrajectorySVG draws a campaign's trajectory: every trial with a latency
// (filled when kept), the best-so-far as a step line, the baseline and the
// HBM floor as horizontal lines. The x axis is the experiment number; the y
// axis is latency in µs on a log scale when it spans more than a decade.
func TrajectorySVG(w campaign.WakeUp) string {
	const (
		width, height       = 900, 480
		left, right         = 80, 24
		top, bottom         = 48, 56
		plotW, plotH        = width - left - right, height - top - bottom
		colorTrial, colorKp = "#9aa5b1", "#1f77b4"
	)
	type pt struct {
		x    int
		y    float64
		kept bool
	}
	var pts []pt
	var best []pt
	maxX := 1
	lo, hi := math.Inf(1), math.Inf(-1)
	see := func(v float64) {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, t := range w.Trajectory {
		maxX = max(maxX, t.Experiment)
		if t.LatencyUS != nil {
			pts = append(pts, pt{t.Experiment, *t.LatencyUS, t.Kept})
			see(*t.LatencyUS)
		}
		if t.BestUS != nil {
			best = append(best, pt{x: t.Experiment, y: *t.BestUS})
			see(*t.BestUS)
		}
	}
	if w.BoundUS != nil {
		see(*w.BoundUS)
	}
	if w.BaselineUS != nil {
		see(*w.BaselineUS)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	title := fmt.Sprintf("%s — best latency vs HBM floor", w.Campaign)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16">%s</text>`+"\n", left, html.EscapeString(title))
	if math.IsInf(lo, 1) {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no latency recorded yet</text></svg>`+"\n", left, top+plotH/2)
		return b.String()
	}
	logScale := hi/lo > 10
	if !logScale {
		pad := (hi - lo) * 0.1
		if pad == 0 {
			pad = math.Max(hi*0.05, 1e-9)
		}
		lo, hi = math.Max(0, lo-pad), hi+pad
	} else {
		lo, hi = lo/1.2, hi*1.2
	}
	yOf := func(v float64) float64 {
		if logScale {
			return float64(top) + float64(plotH)*(1-(math.Log(v)-math.Log(lo))/(math.Log(hi)-math.Log(lo)))
		}
		return float64(top) + float64(plotH)*(1-(v-lo)/(hi-lo))
	}
	xOf := func(x int) float64 { return float64(left) + float64(plotW)*float64(x)/float64(maxX) }
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", left, top, plotW, plotH)
	for i := 0; i <= 4; i++ {
		var v float64
		if logScale {
			v = math.Exp(math.Log(lo) + (math.Log(hi)-math.Log(lo))*float64(i)/4)
		} else {
			v = lo + (hi-lo)*float64(i)/4
		}
		y := yOf(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, y, left+plotW, y, left-6, y+4, axisLabel(v))
	}
	for i := 0; i <= 4; i++ {
		x := maxX * i / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", xOf(x), top+plotH+16, x)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">experiment</text>`+"\n", left+plotW/2, height-16)
	fmt.Fprintf(&b, `<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">latency (µs%s)</text>`+"\n", top+plotH/2, top+plotH/2, map[bool]string{true: ", log", false: ""}[logScale])
	hline := func(v float64, color, label string) {
		y := yOf(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="6 4"/><text x="%d" y="%.1f" fill="%s" text-anchor="end">%s %s µs</text>`+"\n",
			left, y, left+plotW, y, color, left+plotW-4, y-4, color, label, axisLabel(v))
	}
	if w.BoundUS != nil {
		hline(*w.BoundUS, "#d62728", "HBM floor")
	}
	if w.BaselineUS != nil {
		hline(*w.BaselineUS, "#7f7f7f", "baseline")
	}
	for _, p := range pts {
		fill := "none"
		color := colorTrial
		if p.kept {
			fill, color = colorKp, colorKp
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="%s"/>`+"\n", xOf(p.x), yOf(p.y), fill, color)
	}
	if len(best) > 0 {
		var path strings.Builder
		for i, p := range best {
			x, y := xOf(p.x), yOf(p.y)
			if i == 0 {
				fmt.Fprintf(&path, "M%.1f %.1f", x, y)
				continue
			}
			fmt.Fprintf(&path, " H%.1f V%.1f", x, y)
		}
		fmt.Fprintf(&path, " H%.1f", xOf(maxX))
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", path.String(), colorKp)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">● kept  ○ tried  — best so far</text>`+"\n", left, top-8, colorKp)
	b.WriteString("</svg>\n")
	return b.String()
}

func axisLabel(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
