package flywheel

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// Columns is results.tsv's header, in the reference's exact order.
var Columns = []string{
	"experiment", "tag", "loop", "model", "gpu", "regime", "correctness",
	"latency_us", "pct_of_roofline", "schedule_id", "kernel_id", "description",
}

// HeaderLine is the header as written to the file, without its newline.
var HeaderLine = strings.Join(Columns, "\t")

// Row tags (docs/spec/loop.md). A row's tag says what became of the experiment:
//
//	kept      correct and the new incumbent
//	tried     correct (PASS) but not kept: not a ≥ min_gain win
//	revert    valid but incorrect (correctness FAIL); never timed
//	rejected  invalid: lowering, validation or launch feasibility refused it
//	failed    no verdict for another reason (infrastructure failure after
//	          retries, a malformed verdict)
//	crash     the evaluator crashed
//	timeout   the watchdog or the wall clock expired
const (
	TagKept     = "kept"
	TagTried    = "tried"
	TagRevert   = "revert"
	TagRejected = "rejected"
	TagFailed   = "failed"
	TagCrash    = "crash"
	TagTimeout  = "timeout"
)

// Correctness values. latency_us is blank unless the correctness is PASS.
const (
	CorrectPass     = "PASS"
	CorrectFail     = "FAIL"
	CorrectRejected = "REJECTED"
	CorrectCrash    = "CRASH"
	CorrectTimeout  = "TIMEOUT"
)

// Loop and regime values.
const (
	LoopSchedule    = "schedule"
	LoopInstruction = "instruction"
	RegimeSingle    = "single-stream"
)

// Row is one results.tsv line.
type Row struct {
	Experiment  int    `json:"experiment"`
	Tag         string `json:"tag"`
	Loop        string `json:"loop"`
	Model       string `json:"model"`
	GPU         string `json:"gpu"`
	Regime      string `json:"regime"`
	Correctness string `json:"correctness"`
	// LatencyUS is nil (a blank field) unless Correctness is PASS.
	LatencyUS *float64 `json:"latency_us"`
	// PctOfRoofline is latency / floor × 100 (100 = at the floor).
	PctOfRoofline *float64 `json:"pct_of_roofline"`
	ScheduleID    string   `json:"schedule_id"`
	KernelID      string   `json:"kernel_id"`
	Description   string   `json:"description"`
}

// check enforces the honesty rules a row must meet before it is written.
func (r *Row) check() error {
	if r.Correctness == "" {
		return errors.New("flywheel: refusing a row with no correctness verdict")
	}
	if r.Experiment < 0 {
		return fmt.Errorf("flywheel: negative experiment number %d", r.Experiment)
	}
	if r.LatencyUS != nil {
		if r.Correctness != CorrectPass {
			return fmt.Errorf("flywheel: experiment %d: latency without a correctness PASS (%s)", r.Experiment, r.Correctness)
		}
		if !ir.Finite(*r.LatencyUS) {
			return fmt.Errorf("flywheel: experiment %d: latency %v is not finite", r.Experiment, *r.LatencyUS)
		}
	}
	if r.PctOfRoofline != nil && !ir.Finite(*r.PctOfRoofline) {
		return fmt.Errorf("flywheel: experiment %d: pct_of_roofline %v is not finite", r.Experiment, *r.PctOfRoofline)
	}
	return nil
}

// Line renders the row as one escaped results.tsv line with its newline.
func (r *Row) Line() string {
	fields := []string{
		strconv.Itoa(r.Experiment), r.Tag, r.Loop, r.Model, r.GPU, r.Regime, r.Correctness,
		formatOptional(r.LatencyUS), formatOptional(r.PctOfRoofline),
		r.ScheduleID, r.KernelID, r.Description,
	}
	for i := range fields {
		fields[i] = Escape(fields[i])
	}
	return strings.Join(fields, "\t") + "\n"
}

func formatOptional(f *float64) string {
	if f == nil {
		return ""
	}
	return pyjson.FormatFloat(*f)
}

// AppendRows appends rows to the results.tsv at path under an exclusive
// lock, writing the header when the file is new (or was only a torn
// header), and fsyncs before returning. No row is written unless all pass
// the honesty checks. A file whose header is not results.tsv's is refused.
func AppendRows(path string, rows ...Row) error {
	var body strings.Builder
	for i := range rows {
		if err := rows[i].check(); err != nil {
			return err
		}
		body.WriteString(rows[i].Line())
	}
	return appendLocked(path, func(size int64, first []byte) ([]byte, error) {
		if size == 0 {
			return []byte(HeaderLine + "\n" + body.String()), nil
		}
		if string(first) != HeaderLine {
			return nil, fmt.Errorf("flywheel: %s: not a results.tsv (header %q)", path, Clip(string(first), 80))
		}
		return []byte(body.String()), nil
	})
}

// ParseError locates a malformed results.tsv line.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("results.tsv line %d: %s", e.Line, e.Msg) }

// ReadRows reads the results.tsv at path. A missing file has no rows. An
// unterminated last line is a torn write and is ignored.
func ReadRows(path string) ([]Row, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("flywheel: %w", err)
	}
	return ParseRows(data)
}

// ParseRows parses results.tsv content (see ReadRows). Columns are found by
// name in the header, so a file with extra columns still reads; blank lines
// are skipped.
func ParseRows(data []byte) ([]Row, error) {
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		return nil, nil // nothing complete, not even the header
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	col, err := headerIndex(lines[0])
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, line := range lines[1:] {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		r, err := parseRow(line, col, len(col.names))
		if err != nil {
			return rows, &ParseError{Line: i + 2, Msg: err.Error()}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

type columnIndex struct {
	names []string
	pos   map[string]int
}

func headerIndex(line string) (columnIndex, error) {
	names := strings.Split(strings.TrimSuffix(line, "\r"), "\t")
	ci := columnIndex{names: names, pos: make(map[string]int, len(names))}
	for i, n := range names {
		if _, dup := ci.pos[n]; dup {
			return ci, &ParseError{Line: 1, Msg: fmt.Sprintf("duplicate column %q", n)}
		}
		ci.pos[n] = i
	}
	for _, c := range Columns {
		if _, ok := ci.pos[c]; !ok {
			return ci, &ParseError{Line: 1, Msg: fmt.Sprintf("header lacks column %q", c)}
		}
	}
	return ci, nil
}

func parseRow(line string, col columnIndex, n int) (Row, error) {
	fields := strings.Split(line, "\t")
	if len(fields) != n {
		return Row{}, fmt.Errorf("%d fields, want %d", len(fields), n)
	}
	get := func(name string) string { return Unescape(fields[col.pos[name]]) }
	var r Row
	exp, err := strconv.Atoi(strings.TrimSpace(get("experiment")))
	if err != nil {
		return r, fmt.Errorf("experiment %q is not an integer", get("experiment"))
	}
	r.Experiment = exp
	r.Tag, r.Loop, r.Model, r.GPU = get("tag"), get("loop"), get("model"), get("gpu")
	r.Regime, r.Correctness = get("regime"), get("correctness")
	if r.LatencyUS, err = parseOptional(get("latency_us")); err != nil {
		return r, fmt.Errorf("latency_us: %v", err)
	}
	if r.PctOfRoofline, err = parseOptional(get("pct_of_roofline")); err != nil {
		return r, fmt.Errorf("pct_of_roofline: %v", err)
	}
	r.ScheduleID, r.KernelID, r.Description = get("schedule_id"), get("kernel_id"), get("description")
	return r, nil
}

func parseOptional(s string) (*float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	return &f, nil
}

// Clip returns s cut to at most n runes (Python's s[:n]), as descriptions
// and reasons are clipped.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// DescriptionLimit is the longest description, in characters, a row gets
// (the reference clips to 200).
const DescriptionLimit = 200

// ClipDescription cuts a description to DescriptionLimit characters.
func ClipDescription(s string) string { return Clip(s, DescriptionLimit) }
