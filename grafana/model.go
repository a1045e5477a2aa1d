package grafana

// The types below are the subset of Grafana's dashboard JSON model (schema
// version SchemaVersion) that amk's dashboards use. Field order is the order
// in the committed JSON.

// SchemaVersion is the dashboard schema version the JSON is written for
// (Grafana 10.4 and later read it without migration).
const SchemaVersion = 39

// DatasourceUID is the uid of the provisioned Prometheus datasource
// (provisioning/datasources/prometheus.yaml); every panel names it.
const DatasourceUID = "amk-prometheus"

// Datasource names a datasource by type and uid.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Prometheus is the datasource reference every panel and query carries.
func Prometheus() *Datasource { return &Datasource{Type: "prometheus", UID: DatasourceUID} }

// Dashboard is one dashboard.
type Dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Description   string     `json:"description"`
	Tags          []string   `json:"tags"`
	Editable      bool       `json:"editable"`
	GraphTooltip  int        `json:"graphTooltip"`
	Links         []Link     `json:"links"`
	Refresh       string     `json:"refresh"`
	SchemaVersion int        `json:"schemaVersion"`
	Time          TimeRange  `json:"time"`
	Timezone      string     `json:"timezone"`
	Templating    Templating `json:"templating"`
	Panels        []Panel    `json:"panels"`
	Version       int        `json:"version"`
}

// Link is a dashboard link (here: to the other amk dashboards).
type Link struct {
	Title       string   `json:"title"`
	Type        string   `json:"type"`
	Tags        []string `json:"tags"`
	AsDropdown  bool     `json:"asDropdown"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
}

// TimeRange is the default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Templating holds the template variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a query template variable (label_values over Prometheus).
type Variable struct {
	Name        string         `json:"name"`
	Label       string         `json:"label"`
	Description string         `json:"description,omitempty"`
	Type        string         `json:"type"`
	Datasource  *Datasource    `json:"datasource"`
	Definition  string         `json:"definition"`
	Query       string         `json:"query"`
	Refresh     int            `json:"refresh"`
	Regex       string         `json:"regex"`
	Sort        int            `json:"sort"`
	Multi       bool           `json:"multi"`
	IncludeAll  bool           `json:"includeAll"`
	AllValue    string         `json:"allValue,omitempty"`
	Current     map[string]any `json:"current"`
	Options     []any          `json:"options"`
	Hide        int            `json:"hide"`
}

// Panel is one panel.
type Panel struct {
	ID              int              `json:"id"`
	Type            string           `json:"type"`
	Title           string           `json:"title"`
	Description     string           `json:"description,omitempty"`
	Datasource      *Datasource      `json:"datasource"`
	GridPos         GridPos          `json:"gridPos"`
	FieldConfig     FieldConfig      `json:"fieldConfig"`
	Options         map[string]any   `json:"options"`
	Targets         []Target         `json:"targets"`
	Transformations []Transformation `json:"transformations,omitempty"`
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// FieldConfig holds field defaults and overrides.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []Override    `json:"overrides"`
}

// FieldDefaults are the standard field options.
type FieldDefaults struct {
	Unit       string         `json:"unit,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Min        *float64       `json:"min,omitempty"`
	Max        *float64       `json:"max,omitempty"`
	Color      map[string]any `json:"color"`
	Thresholds Thresholds     `json:"thresholds"`
	Mappings   []any          `json:"mappings"`
	Custom     map[string]any `json:"custom,omitempty"`
}

// Thresholds colour values by absolute steps.
type Thresholds struct {
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
}

// Step is one threshold; the first has no value (it starts at -Inf).
type Step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// Override changes properties of the fields a matcher selects.
type Override struct {
	Matcher    Matcher    `json:"matcher"`
	Properties []Property `json:"properties"`
}

// Matcher selects fields.
type Matcher struct {
	ID      string `json:"id"`
	Options any    `json:"options"`
}

// Property is one overridden field option.
type Property struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID        string      `json:"refId"`
	Datasource   *Datasource `json:"datasource"`
	EditorMode   string      `json:"editorMode"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat,omitempty"`
	Format       string      `json:"format"`
	Range        bool        `json:"range"`
	Instant      bool        `json:"instant"`
}

// Transformation post-processes a panel's query results.
type Transformation struct {
	ID      string         `json:"id"`
	Options map[string]any `json:"options"`
}
