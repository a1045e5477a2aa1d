package schedule

import (
	"bytes"
	_ "embed" // the calibrated records: costs.json
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// costsFile is the calibrated cost records, one per target that has one
// (schedule/costs.json, written by `amkctl calibrate --write`): {} until a
// calibration on a device lands. Its format is CostRecords.
//
//go:embed costs.json
var costsFile []byte

// MaxCostRecordsBytes bounds a cost-records file.
const MaxCostRecordsBytes = 1 << 20

// CostRecords are the calibrated cost records by target name.
type CostRecords map[string]CostRecord

// CostRecord is one target's calibration: the CostParams it overrides (by
// the names of CostParamNames; a field it leaves out stays at
// DefaultCostParams) and where the values came from.
type CostRecord struct {
	Params     map[string]float64 `json:"params"`
	Provenance CostProvenance     `json:"provenance"`
}

// CostProvenance says how a record was fitted.
type CostProvenance struct {
	Date    string `json:"date"`    // YYYY-MM-DD, UTC
	Device  string `json:"device"`  // the verdicts' device(s), as they name it
	Command string `json:"command"` // the calibrate command line
	Points  int    `json:"points"`  // measured points fitted
	// RMSLogErrorBefore and RMSLogErrorAfter are the root-mean-square of
	// ln(predicted / measured) over the points under DefaultCostParams and
	// under the record.
	RMSLogErrorBefore float64 `json:"rms_log_error_before"`
	RMSLogErrorAfter  float64 `json:"rms_log_error_after"`
	// Fitted names the parameters the fit moved; KeptDefault those the
	// points could not identify, left at their defaults.
	Fitted      []string `json:"fitted"`
	KeptDefault []string `json:"kept_default"`
}

// costField is one CostParams field as records name it, with the range a
// record may set it to (wide: a sanity bound, not a prior).
type costField struct {
	name   string
	lo, hi float64
	ptr    func(*CostParams) *float64
}

var costFields = []costField{
	{"achievable_bw", 0.05, 1, func(c *CostParams) *float64 { return &c.AchievableBW }},
	{"achievable_flop", 0.05, 1, func(c *CostParams) *float64 { return &c.AchievableFlop }},
	{"dispatch_us", 0, 50, func(c *CostParams) *float64 { return &c.DispatchUS }},
	{"signal_us", 0, 50, func(c *CostParams) *float64 { return &c.SignalUS }},
	{"wake_us", 0, 50, func(c *CostParams) *float64 { return &c.WakeUS }},
	{"hbm_latency_us", 0.05, 10, func(c *CostParams) *float64 { return &c.HBMLatencyUS }},
	{"inflight_per_lane", 1, 4096, func(c *CostParams) *float64 { return &c.InflightPerLane }},
	{"max_sm_stream_gbs", 0, 10000, func(c *CostParams) *float64 { return &c.MaxSMStreamGBs }},
	{"l2_bw_factor", 0.1, 100, func(c *CostParams) *float64 { return &c.L2BWFactor }},
	{"tile_fixed_us", 0, 50, func(c *CostParams) *float64 { return &c.TileFixedUS }},
	{"prefetch_issue_us", 0, 50, func(c *CostParams) *float64 { return &c.PrefetchIssueUS }},
	{"pipeline_gain", 0, 100, func(c *CostParams) *float64 { return &c.PipelineGain }},
	{"min_exposed", 0, 1, func(c *CostParams) *float64 { return &c.MinExposed }},
	{"staging_us", 0, 50, func(c *CostParams) *float64 { return &c.StagingUS }},
	{"epilogue_us", 0, 50, func(c *CostParams) *float64 { return &c.EpilogueUS }},
	{"alu_gops_per_sm", 1, 10000, func(c *CostParams) *float64 { return &c.ALUGOpsPerSM }},
	{"dequant_ops_i8", 0, 64, func(c *CostParams) *float64 { return &c.DequantOpsI8 }},
	{"dequant_ops_i4", 0, 64, func(c *CostParams) *float64 { return &c.DequantOpsI4 }},
}

func findCostField(name string) (costField, bool) {
	for _, f := range costFields {
		if f.name == name {
			return f, true
		}
	}
	return costField{}, false
}

// CostParamNames lists the names records give CostParams' fields.
func CostParamNames() []string {
	out := make([]string, len(costFields))
	for i, f := range costFields {
		out[i] = f.name
	}
	return out
}

// CostParamRange is the range a record may set the named parameter to.
func CostParamRange(name string) (lo, hi float64, ok bool) {
	f, ok := findCostField(name)
	return f.lo, f.hi, ok
}

// Param is the named parameter's value.
func (c CostParams) Param(name string) (float64, bool) {
	f, ok := findCostField(name)
	if !ok {
		return 0, false
	}
	return *f.ptr(&c), true
}

// SetParam sets the named parameter; a value that is not finite or lies
// outside CostParamRange is an error and changes nothing.
func (c *CostParams) SetParam(name string, v float64) error {
	f, ok := findCostField(name)
	switch {
	case !ok:
		return fmt.Errorf("unknown cost parameter %q (known: %s)", name, strings.Join(CostParamNames(), ", "))
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("cost parameter %s: %v is not finite", name, v)
	case v < f.lo || v > f.hi:
		return fmt.Errorf("cost parameter %s: %g is outside [%g, %g]", name, v, f.lo, f.hi)
	}
	*f.ptr(c) = v
	return nil
}

// Apply sets the record's parameters on c (a record from
// ParseCostRecords: every name known, every value in range).
func (r CostRecord) Apply(c *CostParams) error {
	names := make([]string, 0, len(r.Params))
	for n := range r.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := c.SetParam(n, r.Params[n]); err != nil {
			return err
		}
	}
	return nil
}

// ParseCostRecords reads a cost-records file strictly: one JSON object
// keyed by known target names, no unknown or duplicate keys, every
// parameter known, finite and in range, and a complete provenance.
func ParseCostRecords(data []byte) (CostRecords, error) {
	if len(data) > MaxCostRecordsBytes {
		return nil, fmt.Errorf("cost records: %d bytes, over the %d-byte limit", len(data), MaxCostRecordsBytes)
	}
	if _, err := pyjson.ParseUnique(data); err != nil {
		return nil, fmt.Errorf("cost records: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var recs CostRecords
	if err := dec.Decode(&recs); err != nil {
		return nil, fmt.Errorf("cost records: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("cost records: data after the JSON object")
	}
	if recs == nil {
		return nil, errors.New("cost records: want a JSON object keyed by target name")
	}
	targets := make([]string, 0, len(recs))
	for name := range recs {
		targets = append(targets, name)
	}
	sort.Strings(targets)
	for _, name := range targets {
		if err := recs[name].check(name); err != nil {
			return nil, fmt.Errorf("cost records: %s: %w", name, err)
		}
	}
	return recs, nil
}

func (r CostRecord) check(target string) error {
	if _, err := ir.Target(target); err != nil {
		return err
	}
	if len(r.Params) == 0 {
		return errors.New("no params")
	}
	var c CostParams
	if err := r.Apply(&c); err != nil {
		return err
	}
	p := r.Provenance
	if _, err := time.Parse(time.DateOnly, p.Date); err != nil {
		return fmt.Errorf("provenance date %q is not YYYY-MM-DD", p.Date)
	}
	switch {
	case strings.TrimSpace(p.Device) == "":
		return errors.New("provenance device is empty")
	case strings.TrimSpace(p.Command) == "":
		return errors.New("provenance command is empty")
	case p.Points <= 0:
		return fmt.Errorf("provenance points %d: want at least one", p.Points)
	case !(p.RMSLogErrorBefore >= 0) || !(p.RMSLogErrorAfter >= 0) || math.IsInf(p.RMSLogErrorBefore, 0) || math.IsInf(p.RMSLogErrorAfter, 0):
		return errors.New("provenance errors must be finite and non-negative")
	}
	for _, n := range slices.Concat(p.Fitted, p.KeptDefault) {
		if _, ok := findCostField(n); !ok {
			return fmt.Errorf("provenance names unknown cost parameter %q", n)
		}
	}
	return nil
}

// Marshal writes the records as the data file holds them (indented,
// targets and parameters in sorted order, a final newline).
func (recs CostRecords) Marshal() ([]byte, error) {
	if recs == nil {
		recs = CostRecords{}
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

var calibrated = sync.OnceValues(func() (CostRecords, error) { return ParseCostRecords(costsFile) })

// CalibratedCosts are (a copy of) the embedded records (schedule/costs.json).
// A test loads them, so a binary never ships a file that fails to parse;
// should it, TargetCosts falls back to DefaultCostParams.
func CalibratedCosts() (CostRecords, error) {
	recs, err := calibrated()
	if err != nil {
		return nil, err
	}
	out := make(CostRecords, len(recs))
	for name, r := range recs {
		r.Params = maps.Clone(r.Params)
		r.Provenance.Fitted = slices.Clone(r.Provenance.Fitted)
		r.Provenance.KeptDefault = slices.Clone(r.Provenance.KeptDefault)
		out[name] = r
	}
	return out, nil
}

// calibratedRecord is the embedded record of a target, if it has one.
func calibratedRecord(target string) (CostRecord, bool) {
	recs, err := calibrated()
	if err != nil {
		return CostRecord{}, false
	}
	r, ok := recs[target]
	return r, ok
}
