package grafana

import (
	"maps"
	"slices"
)

// Constructors that keep the dashboard definitions short. A panel is built
// by its kind's constructor, adjusted with the with* methods (value
// receivers: each returns a changed copy), and placed by layout.

// newDashboard returns a dashboard with amk's common settings.
func newDashboard(uid, title, description string, vars []Variable, rows ...[]Panel) Dashboard {
	return Dashboard{
		UID: uid, Title: title, Description: description,
		Tags:         []string{"amk"},
		Editable:     true,
		GraphTooltip: 1, // shared crosshair
		Links: []Link{{Title: "amk dashboards", Type: "dashboards", Tags: []string{"amk"},
			AsDropdown: true, IncludeVars: true, KeepTime: true}},
		Refresh:       "30s",
		SchemaVersion: SchemaVersion,
		Time:          TimeRange{From: "now-12h", To: "now"},
		Templating:    Templating{List: vars},
		Panels:        layout(rows...),
		Version:       1,
	}
}

// queryVariable is a label_values variable; multi-valued with an All option
// matching everything.
func queryVariable(name, label, description, selector string) Variable {
	def := "label_values(" + selector + ", " + name + ")"
	return Variable{
		Name: name, Label: label, Description: description, Type: "query",
		Datasource: Prometheus(),
		Definition: def,
		Query:      def, // the classic string form; every Grafana version since 7 reads it
		Refresh:    2,   // on time range change
		Sort:       1,   // alphabetical
		Multi:      true, IncludeAll: true, AllValue: ".*",
		Current: map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		Options: []any{},
	}
}

// layout places rows of panels top to bottom, each row left to right, and
// numbers the panels.
func layout(rows ...[]Panel) []Panel {
	var out []Panel
	y := 0
	for _, row := range rows {
		x, h := 0, 0
		for _, p := range row {
			p.GridPos.X, p.GridPos.Y = x, y
			x += p.GridPos.W
			h = max(h, p.GridPos.H)
			p.ID = len(out) + 1
			out = append(out, p)
		}
		y += h
	}
	return out
}

// series is a range query (a line over time).
func series(expr, legend string) Target {
	return Target{Expr: expr, LegendFormat: legend, Format: "time_series", Range: true}
}

// instant is an instant query (a value now, or over $__range).
func instant(expr, legend string) Target {
	return Target{Expr: expr, LegendFormat: legend, Format: "time_series", Instant: true}
}

// tableOf is an instant query whose labels become table columns.
func tableOf(expr string) Target {
	return Target{Expr: expr, Format: "table", Instant: true}
}

// newPanel builds a panel of kind typ and names the datasource on it and on
// every query.
func newPanel(typ, title, description, unit string, w, h int, options map[string]any, targets []Target) Panel {
	for i := range targets {
		targets[i].RefID = string(rune('A' + i))
		targets[i].Datasource = Prometheus()
		targets[i].EditorMode = "code"
	}
	return Panel{
		Type: typ, Title: title, Description: description, Datasource: Prometheus(),
		GridPos: GridPos{W: w, H: h},
		FieldConfig: FieldConfig{Defaults: FieldDefaults{
			Unit:       unit,
			Color:      map[string]any{"mode": "palette-classic"},
			Thresholds: Thresholds{Mode: "absolute", Steps: []Step{{Color: "green"}}},
			Mappings:   []any{},
		}, Overrides: []Override{}},
		Options: options,
		Targets: targets,
	}
}

func reduceLast() map[string]any {
	return map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false}
}

func legend(mode string) map[string]any {
	return map[string]any{"displayMode": mode, "placement": "bottom", "showLegend": true, "calcs": []string{}}
}

// stat shows the last value of each series.
func stat(title, description, unit string, w int, targets ...Target) Panel {
	p := newPanel("stat", title, description, unit, w, 4, map[string]any{
		"reduceOptions": reduceLast(), "colorMode": "value", "graphMode": "area",
		"justifyMode": "auto", "orientation": "auto", "textMode": "auto", "wideLayout": true,
	}, targets)
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	return p
}

// timeseries draws lines over time.
func timeseries(title, description, unit string, w, h int, targets ...Target) Panel {
	p := newPanel("timeseries", title, description, unit, w, h, map[string]any{
		"legend": legend("list"), "tooltip": map[string]any{"mode": "multi", "sort": "desc"},
	}, targets)
	p.FieldConfig.Defaults.Custom = map[string]any{
		"drawStyle": "line", "lineInterpolation": "linear", "lineWidth": 2, "fillOpacity": 10,
		"showPoints": "never", "spanNulls": false, "axisPlacement": "auto",
		"stacking": map[string]any{"mode": "none", "group": "A"},
	}
	return p
}

// bargauge shows one bar per series (its last value).
func bargauge(title, description, unit string, w, h int, targets ...Target) Panel {
	p := newPanel("bargauge", title, description, unit, w, h, map[string]any{
		"reduceOptions": reduceLast(), "orientation": "horizontal", "displayMode": "gradient",
		"valueMode": "color", "showUnfilled": true, "namePlacement": "auto", "sizing": "auto",
	}, targets)
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	return p
}

// table lists series as rows, labels as columns.
func table(title, description string, w, h int, hide []string, targets ...Target) Panel {
	p := newPanel("table", title, description, "", w, h, map[string]any{
		"showHeader": true, "cellHeight": "sm",
	}, targets)
	excluded := map[string]any{}
	for _, c := range hide {
		excluded[c] = true
	}
	p.Transformations = []Transformation{{ID: "organize", Options: map[string]any{"excludeByName": excluded}}}
	return p
}

// stateTimeline shows a discrete state per series over time.
func stateTimeline(title, description string, w, h int, targets ...Target) Panel {
	p := newPanel("state-timeline", title, description, "", w, h, map[string]any{
		"mergeValues": true, "showValue": "auto", "alignValue": "left", "rowHeight": 0.9,
		"legend": legend("list"), "tooltip": map[string]any{"mode": "single", "sort": "none"},
	}, targets)
	p.FieldConfig.Defaults.Custom = map[string]any{"fillOpacity": 80, "lineWidth": 0}
	return p
}

// withThresholds colours values: base colour, then colour from each value up.
func (p Panel) withThresholds(base string, steps ...Step) Panel {
	p.FieldConfig.Defaults.Thresholds = Thresholds{Mode: "absolute", Steps: append([]Step{{Color: base}}, steps...)}
	return p
}

// from is a threshold step.
func from(v float64, color string) Step { return Step{Color: color, Value: &v} }

// withRange fixes the axis or gauge range.
func (p Panel) withRange(lo, hi *float64) Panel {
	p.FieldConfig.Defaults.Min, p.FieldConfig.Defaults.Max = lo, hi
	return p
}

// withDecimals fixes the number of decimals shown.
func (p Panel) withDecimals(n int) Panel {
	p.FieldConfig.Defaults.Decimals = &n
	return p
}

// withCustom sets a custom (visualisation-specific) field option.
func (p Panel) withCustom(key string, value any) Panel {
	custom := maps.Clone(p.FieldConfig.Defaults.Custom)
	if custom == nil {
		custom = map[string]any{}
	}
	custom[key] = value
	p.FieldConfig.Defaults.Custom = custom
	return p
}

// withOption sets a panel option.
func (p Panel) withOption(key string, value any) Panel {
	options := maps.Clone(p.Options)
	options[key] = value
	p.Options = options
	return p
}

// withOverride adds a field override for the series whose display name
// matches the regular expression.
func (p Panel) withOverride(nameRegexp string, props ...Property) Panel {
	p.FieldConfig.Overrides = append(append([]Override{}, p.FieldConfig.Overrides...),
		Override{Matcher: Matcher{ID: "byRegexp", Options: nameRegexp}, Properties: props})
	return p
}

// withValueText maps exact values to text and colour (value mappings).
func (p Panel) withValueText(texts map[string][2]string) Panel {
	opts := map[string]any{}
	i := 0
	for _, v := range slices.Sorted(maps.Keys(texts)) {
		opts[v] = map[string]any{"text": texts[v][0], "color": texts[v][1], "index": i}
		i++
	}
	p.FieldConfig.Defaults.Mappings = []any{map[string]any{"type": "value", "options": opts}}
	return p
}
