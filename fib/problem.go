package fib

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Problem levels: an Error breaks a seed-003 rule; a Warning is worth
// reading but the record still holds.
const (
	Error   = "error"
	Warning = "warning"
)

// Problem is one finding: the field it is about (a dotted path such as
// "inputs.eps.shape"), why, and its level.
type Problem struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
	Level  string `json:"level"`
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Level + ": " + p.Reason
	}
	return p.Level + ": " + p.Field + ": " + p.Reason
}

// Errors keeps only the broken rules.
func Errors(ps []Problem) []Problem {
	var out []Problem
	for _, p := range ps {
		if p.Level == Error {
			out = append(out, p)
		}
	}
	return out
}

// problems collects findings while a record is read and checked.
type problems struct{ list []Problem }

func (ps *problems) add(field, reason string) {
	ps.list = append(ps.list, Problem{Field: field, Reason: reason, Level: Error})
}

func (ps *problems) warn(field, reason string) {
	ps.list = append(ps.list, Problem{Field: field, Reason: reason, Level: Warning})
}

func (ps *problems) addf(field, format string, a ...any) { ps.add(field, fmt.Sprintf(format, a...)) }

// str decodes a string field; required strings must not be empty.
func (ps *problems) str(field string, v json.RawMessage, required bool) string {
	if !required && string(bytes.TrimSpace(v)) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		ps.add(field, "must be a string")
		return ""
	}
	if required && s == "" {
		ps.add(field, "must not be empty")
	}
	return s
}

// strList decodes an optional list of non-empty strings (null = none).
func (ps *problems) strList(field string, v json.RawMessage) []string {
	if string(bytes.TrimSpace(v)) == "null" {
		return nil
	}
	var out []string
	if json.Unmarshal(v, &out) != nil {
		ps.add(field, "must be a list of strings")
		return nil
	}
	for i, s := range out {
		if s == "" {
			ps.addf(fmt.Sprintf("%s[%d]", field, i), "must not be empty")
		}
	}
	return out
}
