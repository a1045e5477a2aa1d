package flywheel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/amk-dev/amk/pyjson"
)

// Summary describes a corpus and, optionally, a results.tsv: what the
// `corpus` verb prints.
type Summary struct {
	CorpusRecords int            `json:"corpus_records"`
	Groups        []CorpusGroup  `json:"groups"`
	Rows          int            `json:"results_rows"`
	RowsByTag     map[string]int `json:"results_rows_by_tag,omitempty"`
	// JoinedRows counts results rows whose schedule_id is also a corpus
	// point's id (ids are the reference's, so AMK and amk files join).
	JoinedRows int   `json:"results_rows_joined_to_corpus"`
	LastRows   []Row `json:"last_rows,omitempty"`
}

// CorpusGroup is the corpus records of one (model, gpu, latency kind).
type CorpusGroup struct {
	Model       string  `json:"model"`
	GPU         string  `json:"gpu"`
	LatencyKind string  `json:"latency_kind"`
	Records     int     `json:"records"`
	BestUS      float64 `json:"best_us"`
	BestPct     float64 `json:"best_pct_of_roofline"`
	BestID      string  `json:"best_schedule_id"`
}

// Summarize groups a corpus by (model, gpu, kind) with the best point of
// each, and tallies results rows by tag; ids names each record's schedule
// id (schedule.Point.ID of its schedule; nil: ids unknown, nothing joins).
func Summarize(recs []Record, ids func(Record) string, rows []Row) Summary {
	s := Summary{CorpusRecords: len(recs), Rows: len(rows), Groups: []CorpusGroup{}}
	index := map[[3]string]int{}
	known := map[string]bool{}
	for _, r := range recs {
		id := ""
		if ids != nil {
			id = ids(r)
			known[id] = id != ""
		}
		k := [3]string{r.Model, r.GPU, r.LatencyKind}
		i, ok := index[k]
		if !ok {
			i = len(s.Groups)
			index[k] = i
			s.Groups = append(s.Groups, CorpusGroup{Model: r.Model, GPU: r.GPU, LatencyKind: r.LatencyKind, BestUS: math.Inf(1)})
		}
		g := &s.Groups[i]
		g.Records++
		if r.LatencyUS < g.BestUS {
			g.BestUS, g.BestPct, g.BestID = r.LatencyUS, r.PctOfRoofline, id
		}
	}
	sort.Slice(s.Groups, func(i, j int) bool {
		a, b := s.Groups[i], s.Groups[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if a.GPU != b.GPU {
			return a.GPU < b.GPU
		}
		return a.LatencyKind < b.LatencyKind
	})
	if len(rows) > 0 {
		s.RowsByTag = map[string]int{}
	}
	for _, r := range rows {
		s.RowsByTag[r.Tag]++
		if known[r.ScheduleID] {
			s.JoinedRows++
		}
	}
	s.LastRows = rows[max(0, len(rows)-10):]
	return s
}

// Text renders the summary for a terminal.
func (s Summary) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flywheel    : %d kept (model, gpu, schedule, result) points\n", s.CorpusRecords)
	for _, g := range s.Groups {
		fmt.Fprintf(&b, "  %-28s %-8s %-12s %4d point(s), best %.3fus (%.1f%% of the floor) %s\n",
			g.Model, g.GPU, g.LatencyKind, g.Records, g.BestUS, g.BestPct, g.BestID)
	}
	if s.Rows == 0 {
		return b.String()
	}
	tags := make([]string, 0, len(s.RowsByTag))
	for t := range s.RowsByTag {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	parts := make([]string, len(tags))
	for i, t := range tags {
		parts[i] = fmt.Sprintf("%s %d", t, s.RowsByTag[t])
	}
	fmt.Fprintf(&b, "results.tsv : %d experiment rows (%s); %d join a corpus point by schedule_id\n",
		s.Rows, strings.Join(parts, ", "), s.JoinedRows)
	for _, r := range s.LastRows {
		lat := ""
		if r.LatencyUS != nil {
			lat = fmt.Sprintf(" lat=%sus", pyjson.FormatFloat(*r.LatencyUS))
		}
		fmt.Fprintf(&b, "  [%s] %s/%s corr=%s%s %s %s\n", r.Tag, r.Model, r.GPU, r.Correctness, lat, r.ScheduleID, r.Description)
	}
	return b.String()
}

// MergeCorpus returns the records of srcs not already in have, each once:
// two records are the same when their corpus lines are byte-identical
// (Record.Value written compactly).
func MergeCorpus(have []Record, srcs ...[]Record) (add []Record, duplicates int) {
	seen := map[string]bool{}
	for i := range have {
		seen[pyjson.Compact(have[i].Value(), false)] = true
	}
	for _, src := range srcs {
		for i := range src {
			line := pyjson.Compact(src[i].Value(), false)
			if seen[line] {
				duplicates++
				continue
			}
			seen[line] = true
			add = append(add, src[i])
		}
	}
	return add, duplicates
}

// ReferenceState is the part of AMK's amk_orchestration_state.json (the
// Python reference orchestrator's state file for its one campaign)
// that amk imports.
type ReferenceState struct {
	Model           string          `json:"model"`
	GPU             string          `json:"gpu"`
	Status          string          `json:"status"`
	BaselineUS      *float64        `json:"baseline_us"`
	BestUS          *float64        `json:"best_us"`
	BestConfig      json.RawMessage `json:"best_config"`
	BestPct         *float64        `json:"best_pct_roofline"`
	BestKind        string          `json:"best_kind"`
	ExperimentsRun  *int            `json:"experiments_run"`
	ExperimentsKept int             `json:"experiments_kept"`
	MoveOnReason    string          `json:"move_on_reason"`
}

// ImportReferenceState reads AMK's orchestration state and returns it with
// its best point as a corpus record (ok false when the campaign has no
// correct best with a config and a floor to import). The record goes
// through the same import rules as a reference corpus line
// (ImportReference): a state is one such line for its best point.
func ImportReferenceState(data []byte) (st ReferenceState, rec Record, ok bool, err error) {
	root, err := pyjson.ParseUnique(data)
	if err != nil {
		return st, rec, false, fmt.Errorf("orchestration state: %w", err)
	}
	if root.Kind != pyjson.Object {
		return st, rec, false, fmt.Errorf("orchestration state: expected a JSON object, got %s", root.Kind)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, rec, false, fmt.Errorf("orchestration state: %w", err)
	}
	if st.ExperimentsRun == nil || st.Model == "" || st.GPU == "" {
		return st, rec, false, fmt.Errorf("orchestration state: not an AMK orchestration state (model, gpu and experiments_run are required)")
	}
	cfg, hasCfg := root.Get("best_config")
	if st.BestUS == nil || !hasCfg || cfg.Kind != pyjson.Object {
		return st, rec, false, nil
	}
	notes := "imported from AMK orchestration state"
	if st.BestKind != "" {
		notes += "; kind=" + st.BestKind
	}
	line := pyjson.ObjectValue(
		pyjson.M("model", pyjson.StringValue(st.Model)), pyjson.M("gpu", pyjson.StringValue(st.GPU)),
		pyjson.M("regime", pyjson.StringValue(RegimeSingle)), pyjson.M("correctness", pyjson.StringValue(CorrectPass)),
		pyjson.M("latency_us", pyjson.FloatValue(*st.BestUS)), pyjson.M("schedule", cfg),
		pyjson.M("notes", pyjson.StringValue(notes)))
	if st.BestPct != nil {
		line.Set("pct_of_roofline", pyjson.FloatValue(*st.BestPct))
	}
	if st.BestKind == KindMeasuredGPU || st.BestKind == KindPredicted {
		line.Set("latency_kind", pyjson.StringValue(st.BestKind))
	}
	rec, ok = importLine([]byte(pyjson.Compact(line, false)))
	return st, rec, ok, nil
}

// ParseAnyCorpus reads a corpus in either format: each line is taken as an
// amk record, else as a reference (AMK) corpus line (ImportReference's
// rules); skipped counts lines that are neither.
func ParseAnyCorpus(data []byte) (recs []Record, skipped int) {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if v, err := pyjson.Parse(line); err == nil {
			if r, err := RecordFromValue(v); err == nil {
				recs = append(recs, r)
				continue
			}
		}
		if r, ok := importLine(line); ok {
			recs = append(recs, r)
			continue
		}
		skipped++
	}
	return recs, skipped
}
