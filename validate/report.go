package validate

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/pyjson"
)

// Diagnostic is one finding. Code is stable (see the table in doc.go); Task,
// Buffer and Counter name the ids involved, -1 where not applicable; Message
// is the human text, in the reference validator's wording where it has one.
type Diagnostic struct {
	Code    string `json:"code"`
	Task    int    `json:"task"`
	Buffer  int    `json:"buffer"`
	Counter int    `json:"counter"`
	Message string `json:"message"`
}

// Stats summarises the program the way the reference's stats dict does.
type Stats struct {
	Tasks      int     `json:"tasks"`
	Buffers    int     `json:"buffers"`
	Counters   int     `json:"counters"`
	Edges      int     `json:"edges"`
	Acyclic    bool    `json:"acyclic"`
	WeightMB   float64 `json:"weight_MB"`
	SMAssigned bool    `json:"sm_assigned"`
}

// Report is the outcome of Validate. OK is true iff there are no errors;
// warnings never reject.
type Report struct {
	OK       bool         `json:"ok"`
	Errors   []Diagnostic `json:"errors"`
	Warnings []Diagnostic `json:"warnings"`
	Stats    Stats        `json:"stats"`
}

// String renders the report exactly as the reference's report() does:
// "[VALID] {stats}" or "[REJECTED] {stats}" (the stats as a Python dict), then
// one "  ERROR: ..." line per error and one "  warn:  ..." line per warning.
func (r Report) String() string {
	var b strings.Builder
	if r.OK {
		b.WriteString("[VALID] ")
	} else {
		b.WriteString("[REJECTED] ")
	}
	b.WriteString(r.Stats.String())
	for _, e := range r.Errors {
		b.WriteString("\n  ERROR: ")
		b.WriteString(e.Message)
	}
	for _, w := range r.Warnings {
		b.WriteString("\n  warn:  ")
		b.WriteString(w.Message)
	}
	return b.String()
}

// String renders the stats as Python's repr of the reference's stats dict.
func (s Stats) String() string {
	return "{'tasks': " + strconv.Itoa(s.Tasks) +
		", 'buffers': " + strconv.Itoa(s.Buffers) +
		", 'counters': " + strconv.Itoa(s.Counters) +
		", 'edges': " + strconv.Itoa(s.Edges) +
		", 'acyclic': " + pyBool(s.Acyclic) +
		", 'weight_MB': " + pyjson.FormatFloat(s.WeightMB) +
		", 'sm_assigned': " + pyBool(s.SMAssigned) + "}"
}

// JSON renders the report as an indented JSON object with the fields ok,
// errors, warnings (each a list of {code, task, buffer, counter, message}) and
// stats.
func (r Report) JSON() []byte {
	out := r
	if out.Errors == nil {
		out.Errors = []Diagnostic{}
	}
	if out.Warnings == nil {
		out.Warnings = []Diagnostic{}
	}
	b, err := json.MarshalIndent(&out, "", "  ")
	if err != nil { // only non-finite floats could fail; weight_MB is always finite
		return []byte(`{"ok": false, "errors": [], "warnings": [], "stats": {}}`)
	}
	return b
}

// Reason joins the messages of the first n errors with "; " (the one-line
// reason the search and harness report for a rejected program). n <= 0 means
// all errors.
func (r Report) Reason(n int) string {
	errs := r.Errors
	if n > 0 && len(errs) > n {
		errs = errs[:n]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Message
	}
	return strings.Join(msgs, "; ")
}

// Codes lists the codes of the errors, in order (handy in tests and logs).
func (r Report) Codes() []string {
	out := make([]string, len(r.Errors))
	for i, e := range r.Errors {
		out[i] = e.Code
	}
	return out
}

// Has reports whether some error or warning carries the code.
func (r Report) Has(code string) bool {
	for _, d := range r.Errors {
		if d.Code == code {
			return true
		}
	}
	for _, d := range r.Warnings {
		if d.Code == code {
			return true
		}
	}
	return false
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
