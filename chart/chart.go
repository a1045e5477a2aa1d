package chart

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/amk-dev/amk/ir"
)

// Point is one sample.
type Point struct{ X, Y float64 }

// Line is one series of a chart.
type Line struct {
	Name   string
	Points []Point
	Color  color.Color
	// Dashed draws a dashed line (a reference level: the floor, a baseline).
	Dashed bool
	// Dots draws a dot per point instead of a line; Hollow leaves it open.
	Dots, Hollow bool
}

// Chart is one panel.
type Chart struct {
	Title, XLabel, YLabel string
	// Unit is appended to the y tick labels ("µs", "%", "×", "/h").
	Unit string
	// Step draws each value until the next sample (step after).
	Step  bool
	Lines []Line
	// LogY draws the y axis on a log scale when every value is positive.
	LogY bool
	// SoftMin and SoftMax, when set, are kept inside the y range.
	SoftMin, SoftMax *float64
	// XMin and XMax, when XMax > XMin, fix the x range (charts of a grid
	// that share a time axis).
	XMin, XMax float64
	// XTicks, when set, labels x = 0, 1, 2, ... with these names (the
	// values of a knob) instead of numbers.
	XTicks []string
}

// Palette is the series colours, in order.
var Palette = []color.Color{
	color.RGBA{0x1F, 0x77, 0xB4, 0xFF}, color.RGBA{0x2C, 0xA0, 0x2C, 0xFF}, color.RGBA{0xFF, 0x7F, 0x0E, 0xFF},
	color.RGBA{0x94, 0x67, 0xBD, 0xFF}, color.RGBA{0x8C, 0x56, 0x4B, 0xFF}, color.RGBA{0x17, 0xBE, 0xCF, 0xFF},
	color.RGBA{0xBC, 0xBD, 0x22, 0xFF}, color.RGBA{0xE3, 0x77, 0xC2, 0xFF},
}

// Named colours of fixed series.
var (
	Red  = color.RGBA{0xD6, 0x27, 0x28, 0xFF} // the streamed-bytes floor
	Grey = color.RGBA{0x7F, 0x7F, 0x7F, 0xFF} // a baseline, tried points
)

// Format is an output format.
type Format string

// The formats.
const (
	SVG Format = "svg"
	PNG Format = "png"
)

// Size is an image's size in pixels (at 96 dpi for SVG, 1 px = 0.75 pt).
type Size struct{ W, H int }

func (s Size) lengths() (vg.Length, vg.Length) {
	return vg.Length(s.W) * vg.Inch / 96, vg.Length(s.H) * vg.Inch / 96
}

// Draw renders one chart.
func Draw(c Chart, f Format, size Size) ([]byte, error) {
	return Grid("", "", []Chart{c}, 1, f, size)
}

// Grid renders charts cols to a row, each cell sized cell, under a title
// and a subtitle (both may be empty).
func Grid(title, subtitle string, charts []Chart, cols int, f Format, cell Size) ([]byte, error) {
	if len(charts) == 0 || cols < 1 || cell.W < 50 || cell.H < 50 {
		return nil, errors.New("chart: nothing to draw, or a cell under 50×50 px")
	}
	cols = min(cols, len(charts))
	rows := (len(charts) + cols - 1) / cols
	header := 0
	if title != "" {
		header += 34
	}
	if subtitle != "" {
		header += 22
	}
	cw, ch := cell.lengths()
	hdr := vg.Length(header) * vg.Inch / 96
	width, height := cw*vg.Length(cols), ch*vg.Length(rows)+hdr
	var out io.WriterTo
	var dc draw.Canvas
	switch f {
	case SVG:
		c := vgsvg.New(width, height)
		dc = draw.New(c)
		out = c
	case PNG:
		c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96), vgimg.UseBackgroundColor(color.White))
		dc = draw.New(c)
		out = vgimg.PngCanvas{Canvas: c}
	default:
		return nil, fmt.Errorf("chart: unknown format %q (svg, png)", f)
	}
	dc.FillPolygon(color.White, []vg.Point{{X: 0, Y: 0}, {X: width, Y: 0}, {X: width, Y: height}, {X: 0, Y: height}})
	y := height
	if title != "" {
		sty := textStyle(16)
		y -= vg.Points(20)
		dc.FillText(sty, vg.Point{X: vg.Points(10), Y: y}, title)
	}
	if subtitle != "" {
		sty := textStyle(10)
		sty.Color = Grey
		y -= vg.Points(16)
		dc.FillText(sty, vg.Point{X: vg.Points(10), Y: y}, subtitle)
	}
	body := draw.Crop(dc, 0, 0, 0, -hdr)
	plots := make([][]*plot.Plot, rows)
	legends := make([][]*plot.Legend, rows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, cols)
		legends[r] = make([]*plot.Legend, cols)
		for c := range plots[r] {
			i := r*cols + c
			if i < len(charts) {
				p, leg, err := build(charts[i])
				if err != nil {
					return nil, err
				}
				plots[r][c], legends[r][c] = p, leg
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(12), PadY: vg.Points(12),
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10)}
	cells := plot.Align(plots, tiles, body)
	for r := range plots {
		for c, p := range plots[r] {
			if p != nil {
				drawWithLegend(p, legends[r][c], cells[r][c])
			}
		}
	}
	var buf bytes.Buffer
	if _, err := out.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("chart: %v", err)
	}
	return buf.Bytes(), nil
}

// drawWithLegend draws a plot with its legend in a column of its own on the
// right of cell, never over the data. The legend's text is left-aligned
// after its icons, so a viewer that draws it in a wider font than the one
// it was measured with (an SVG whose font is missing) pushes it into blank
// space on the right, not onto a curve.
func drawWithLegend(p *plot.Plot, leg *plot.Legend, cell draw.Canvas) {
	if leg == nil {
		p.Draw(cell)
		return
	}
	r := leg.Rectangle(cell)
	width := (r.Max.X-r.Min.X)*legendSlack + vg.Points(8)
	if width <= 0 {
		p.Draw(cell)
		return
	}
	width = min(width, (cell.Max.X-cell.Min.X)/2)
	p.Draw(draw.Crop(cell, 0, -width, 0, 0))
	leg.Draw(draw.Crop(cell, cell.Max.X-cell.Min.X-width+vg.Points(8), 0, 0, -vg.Points(legendTopOffset)))
}

// legendSlack widens the legend's column beyond its measured width, room
// for a substitute font; legendTopOffset (points) puts its first entry
// level with the top of the plot area, below the title.
const (
	legendSlack     = 1.25
	legendTopOffset = 22
)

func textStyle(size float64) draw.TextStyle {
	return draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, font.Length(size)), Handler: plot.DefaultTextHandler}
}

// build makes one chart's plot and its legend (nil when no series is
// named), which drawWithLegend draws beside it.
func build(c Chart) (*plot.Plot, *plot.Legend, error) {
	p := plot.New()
	p.Title.Text = c.Title
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.Text, p.Y.Label.Text = c.XLabel, c.YLabel
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(9)
	named := false
	p.Add(plotter.NewGrid())
	lo, hi, any := c.span()
	logY := c.LogY && any && lo > 0
	for i, l := range c.Lines {
		xys := make(plotter.XYs, 0, len(l.Points))
		for _, pt := range l.Points {
			if ir.Finite(pt.X) && ir.Finite(pt.Y) && (!logY || pt.Y > 0) {
				xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
			}
		}
		if len(xys) == 0 {
			continue
		}
		col := l.Color
		if col == nil {
			col = Palette[i%len(Palette)]
		}
		if l.Dots {
			s, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, nil, fmt.Errorf("chart %q: %v", c.Title, err)
			}
			s.GlyphStyle.Color, s.GlyphStyle.Radius = col, vg.Points(2.5)
			s.GlyphStyle.Shape = draw.CircleGlyph{}
			if l.Hollow {
				s.GlyphStyle.Shape = draw.RingGlyph{}
			}
			p.Add(s)
			if l.Name != "" {
				leg.Add(l.Name, s)
				named = true
			}
			continue
		}
		ln, err := plotter.NewLine(xys)
		if err != nil {
			return nil, nil, fmt.Errorf("chart %q: %v", c.Title, err)
		}
		ln.LineStyle.Color, ln.LineStyle.Width = col, vg.Points(1.5)
		if c.Step {
			ln.StepStyle = plotter.PostStep
		}
		if l.Dashed {
			ln.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(ln)
		if l.Name != "" {
			leg.Add(l.Name, ln)
			named = true
		}
	}
	var legend *plot.Legend
	if named {
		legend = &leg
	}
	if c.XMax > c.XMin {
		p.X.Min, p.X.Max = c.XMin, c.XMax
	}
	if len(c.XTicks) > 0 {
		p.X.Tick.Marker = namedTicks(c.XTicks)
	}
	if !any {
		p.Title.Text += " (no data yet)"
		p.Y.Min, p.Y.Max = 0, 1
		return p, legend, nil
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = unitTicks{logTicks{}, c.Unit}
		p.Y.Min, p.Y.Max = lo/1.15, hi*1.15
	} else {
		pad := (hi - lo) * 0.08
		p.Y.Min, p.Y.Max = lo-pad, hi+pad
		if lo >= 0 && p.Y.Min < 0 {
			p.Y.Min = 0
		}
		p.Y.Tick.Marker = unitTicks{plot.DefaultTicks{}, c.Unit}
	}
	return p, legend, nil
}

// span is the y range of the chart's finite values and soft limits, widened
// when flat; ok is false when there is no value.
func (c Chart) span() (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, l := range c.Lines {
		for _, pt := range l.Points {
			if ir.Finite(pt.Y) && ir.Finite(pt.X) {
				lo, hi = math.Min(lo, pt.Y), math.Max(hi, pt.Y)
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
		pad := math.Max(math.Abs(hi)*0.1, 1e-9)
		lo, hi = lo-pad, hi+pad
	}
	return lo, hi, true
}

// namedTicks labels the integer positions 0, 1, ... with names.
type namedTicks []string

func (n namedTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for i, name := range n {
		if x := float64(i); x >= lo && x <= hi {
			ts = append(ts, plot.Tick{Value: x, Label: name})
		}
	}
	return ts
}

// unitTicks appends a unit to the major tick labels of a marker.
type unitTicks struct {
	plot.Ticker
	unit string
}

func (u unitTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := u.Ticker.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = shorten(ts[i].Label) + u.unit
		}
	}
	return ts
}

// shorten writes large tick values with a k.
func shorten(label string) string {
	v, err := strconv.ParseFloat(label, 64)
	if err != nil || math.Abs(v) < 10000 {
		return label
	}
	return strconv.FormatFloat(v/1000, 'g', 4, 64) + "k"
}

// logTicks labels 1, 2 and 5 times each power of ten in range (only 1
// when the range spans more than two decades), with unlabelled minor ticks
// between.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	wide := hi/lo > 100
	var ts []plot.Tick
	for d := math.Floor(math.Log10(lo)); d <= math.Ceil(math.Log10(hi)); d++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, d)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (!wide && (m == 2 || m == 5)) {
				t.Label = strconv.FormatFloat(v, 'g', 6, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}
