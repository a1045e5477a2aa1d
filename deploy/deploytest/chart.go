package deploytest

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Line is one series of a chart.
type Line struct {
	Name   string
	Points []Point
	Color  color.RGBA
	Dashed bool
}

// Chart is one panel: a title, the unit its values are in, its lines.
type Chart struct {
	Title string
	Unit  string // appended to the y tick labels ("µs", "%", "×", "s", "/h")
	Step  bool   // draw each value until the next sample (step after)
	Lines []Line
	// SoftMin and SoftMax, when set, are kept inside the y range.
	SoftMin, SoftMax *float64
}

// Palette is Grafana's classic series palette.
var Palette = []color.RGBA{
	{0x73, 0xBF, 0x69, 0xFF}, {0xF2, 0xCC, 0x0C, 0xFF}, {0x57, 0x94, 0xF2, 0xFF}, {0xFF, 0x98, 0x30, 0xFF},
	{0xB8, 0x77, 0xD9, 0xFF}, {0x8A, 0xB8, 0xFF, 0xFF}, {0xFA, 0xDE, 0x2A, 0xFF}, {0xF2, 0x49, 0x5C, 0xFF},
}

// Red is the colour of a fixed "red" series (the HBM floor).
var Red = color.RGBA{0xF2, 0x49, 0x5C, 0xFF}

var (
	background = color.RGBA{0x11, 0x12, 0x17, 0xFF}
	panelFill  = color.RGBA{0x18, 0x1B, 0x1F, 0xFF}
	gridColour = color.RGBA{0x2C, 0x32, 0x35, 0xFF}
	textColour = color.RGBA{0xCC, 0xCC, 0xDC, 0xFF}
	dimColour  = color.RGBA{0x8E, 0x8E, 0x9A, 0xFF}
)

// Layout constants, in pixels.
const (
	fontScale   = 2
	lineHeight  = (glyphH + 4) * fontScale
	panelMargin = 10
	panelPad    = 12
)

// Render draws charts on a grid of cols columns, each cellW×cellH pixels,
// under a title and a subtitle. All charts share one time axis, labelled in
// time elapsed since its start.
func Render(title, subtitle string, charts []Chart, cols, cellW, cellH int) *image.RGBA {
	rows := (len(charts) + cols - 1) / cols
	header := 3*lineHeight + panelMargin
	img := image.NewRGBA(image.Rect(0, 0, cols*cellW, header+rows*cellH))
	fillRect(img, 0, 0, img.Bounds().Dx(), img.Bounds().Dy(), background)
	drawText(img, panelMargin+panelPad, panelMargin+4, title, 3, textColour)
	drawText(img, panelMargin+panelPad, panelMargin+4+(glyphH+5)*3, subtitle, fontScale, dimColour)
	t0, t1 := timeSpan(charts)
	for i, c := range charts {
		x := (i % cols) * cellW
		y := header + (i/cols)*cellH
		drawChart(img, image.Rect(x+panelMargin, y+panelMargin, x+cellW-panelMargin, y+cellH-panelMargin), c, t0, t1)
	}
	return img
}

// WritePNG writes img to path.
func WritePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// timeSpan is the earliest and latest sample time of all charts.
func timeSpan(charts []Chart) (time.Time, time.Time) {
	var t0, t1 time.Time
	for _, c := range charts {
		for _, l := range c.Lines {
			for _, p := range l.Points {
				if t0.IsZero() || p.T.Before(t0) {
					t0 = p.T
				}
				if p.T.After(t1) {
					t1 = p.T
				}
			}
		}
	}
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	return t0, t1
}

// valueSpan is the y range of a chart: its finite values and soft limits,
// widened when flat.
func valueSpan(c Chart) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, l := range c.Lines {
		for _, p := range l.Points {
			if !math.IsNaN(p.V) && !math.IsInf(p.V, 0) {
				lo, hi = math.Min(lo, p.V), math.Max(hi, p.V)
			}
		}
	}
	if lo > hi {
		return 0, 1, false
	}
	if c.SoftMin != nil {
		lo = math.Min(lo, *c.SoftMin)
	}
	if c.SoftMax != nil {
		hi = math.Max(hi, *c.SoftMax)
	}
	if hi == lo {
		pad := math.Max(math.Abs(hi)*0.1, 1)
		lo, hi = lo-pad, hi+pad
	}
	return lo, hi, true
}

// niceTicks returns about n round tick values from one at or below lo to
// one at or above hi, and the step between them.
func niceTicks(lo, hi float64, n int) ([]float64, float64) {
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	first, last := math.Floor(lo/step), math.Ceil(hi/step)
	ticks := make([]float64, 0, int(last-first)+1)
	for i := first; i <= last; i++ {
		ticks = append(ticks, i*step)
	}
	return ticks, step
}

// tickLabel formats a tick value for a step size, with the unit.
func tickLabel(v, step float64, unit string) string {
	if math.Abs(v) < step*1e-9 {
		return "0" + unit
	}
	suffix := ""
	if math.Abs(v) >= 10000 || step >= 10000 {
		v, step, suffix = v/1000, step/1000, "k"
	}
	// As many decimals as the step has (niceTicks steps are 1, 2, 2.5 or 5
	// times a power of ten).
	decimals := 0
	if _, frac, ok := strings.Cut(strconv.FormatFloat(step, 'f', -1, 64), "."); ok {
		decimals = min(len(frac), 6)
	}
	return strconv.FormatFloat(v, 'f', decimals, 64) + suffix + unit
}

// timeTicks chooses a round tick interval for a span of time.
func timeTicks(span time.Duration) time.Duration {
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
		15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
		10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour} {
		if span/d <= 8 {
			return d
		}
	}
	return 12 * time.Hour
}

// elapsedLabel formats time since the start as m:ss, or h:mm past an hour.
func elapsedLabel(d, span time.Duration) string {
	if span >= time.Hour {
		return fmt.Sprintf("%d:%02dh", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// drawChart draws one panel into r.
func drawChart(img *image.RGBA, r image.Rectangle, c Chart, t0, t1 time.Time) {
	fillRect(img, r.Min.X, r.Min.Y, r.Dx(), r.Dy(), panelFill)
	x, y := r.Min.X+panelPad, r.Min.Y+panelPad
	drawText(img, x, y, c.Title, fontScale, textColour)
	y += lineHeight + 4
	// Legend: a swatch and the name of each line, wrapped.
	lx := x
	for _, l := range c.Lines {
		w := 3*fontScale*glyphW + textWidth(l.Name, fontScale)
		if lx > x && lx+w > r.Max.X-panelPad {
			lx, y = x, y+lineHeight
		}
		fillRect(img, lx, y+2*fontScale, 2*fontScale*glyphW, 3*fontScale, l.Color)
		drawText(img, lx+3*fontScale*glyphW-fontScale*2, y, l.Name, fontScale, dimColour)
		lx += w + 4*fontScale*glyphW
	}
	y += lineHeight + 6

	lo, hi, ok := valueSpan(c)
	if !ok {
		drawText(img, x, y+20, "no data", fontScale, dimColour)
		return
	}
	ticks, step := niceTicks(lo, hi, 5)
	lo, hi = ticks[0], ticks[len(ticks)-1]
	labelW := 0
	for _, v := range ticks {
		labelW = max(labelW, textWidth(tickLabel(v, step, c.Unit), fontScale))
	}
	plot := image.Rect(x+labelW+8, y+glyphH*fontScale/2, r.Max.X-panelPad-textWidth("0:00", fontScale)/2, r.Max.Y-panelPad-lineHeight-8)
	if plot.Dx() < 20 || plot.Dy() < 20 {
		return
	}
	yOf := func(v float64) int {
		return plot.Max.Y - int(math.Round((v-lo)/(hi-lo)*float64(plot.Dy())))
	}
	span := t1.Sub(t0)
	xOf := func(t time.Time) int {
		return plot.Min.X + int(math.Round(float64(t.Sub(t0))/float64(span)*float64(plot.Dx())))
	}
	for _, v := range ticks {
		py := yOf(v)
		fillRect(img, plot.Min.X, py, plot.Dx(), 1, gridColour)
		label := tickLabel(v, step, c.Unit)
		drawText(img, plot.Min.X-8-textWidth(label, fontScale), py-glyphH*fontScale/2, label, fontScale, dimColour)
	}
	every := timeTicks(span)
	for d := time.Duration(0); d <= span; d += every {
		px := xOf(t0.Add(d))
		fillRect(img, px, plot.Min.Y, 1, plot.Dy(), gridColour)
		label := elapsedLabel(d, span)
		drawText(img, px-textWidth(label, fontScale)/2, plot.Max.Y+12, label, fontScale, dimColour)
	}
	for _, l := range c.Lines {
		drawLine(img, plot, l, c.Step, xOf, yOf)
	}
}

// drawLine draws a series as a 2-pixel polyline, broken at missing values
// and at gaps longer than three sample steps.
func drawLine(img *image.RGBA, plot image.Rectangle, l Line, step bool, xOf func(time.Time) int, yOf func(float64) int) {
	gap := 3 * typicalStep(l.Points)
	pen := &pen{img: img, clip: plot.Inset(-1), c: l.Color, dashed: l.Dashed}
	var prev *Point
	for i := range l.Points {
		p := &l.Points[i]
		if math.IsNaN(p.V) || math.IsInf(p.V, 0) {
			prev = nil
			continue
		}
		if prev != nil && (gap <= 0 || p.T.Sub(prev.T) <= gap) {
			x0, y0, x1, y1 := xOf(prev.T), yOf(prev.V), xOf(p.T), yOf(p.V)
			if step {
				pen.segment(x0, y0, x1, y0)
				pen.segment(x1, y0, x1, y1)
			} else {
				pen.segment(x0, y0, x1, y1)
			}
		} else {
			pen.segment(xOf(p.T), yOf(p.V), xOf(p.T), yOf(p.V))
		}
		prev = p
	}
}

// typicalStep is the smallest interval between consecutive samples.
func typicalStep(ps []Point) time.Duration {
	var d time.Duration
	for i := 1; i < len(ps); i++ {
		if s := ps[i].T.Sub(ps[i-1].T); s > 0 && (d == 0 || s < d) {
			d = s
		}
	}
	return d
}

// pen draws 2-pixel lines, optionally dashed (8 pixels on, 8 off).
type pen struct {
	img    *image.RGBA
	clip   image.Rectangle
	c      color.RGBA
	dashed bool
	walked int
}

// segment draws from (x0, y0) to (x1, y1) (Bresenham).
func (p *pen) segment(x0, y0, x1, y1 int) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		if !p.dashed || (p.walked/8)%2 == 0 {
			for _, o := range [4][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				if pt := image.Pt(x0+o[0], y0+o[1]); pt.In(p.clip) {
					p.img.SetRGBA(pt.X, pt.Y, p.c)
				}
			}
		}
		p.walked++
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
