package api

import (
	"fmt"
	"net/http"

	"github.com/amk-dev/amk/control"
)

// Error codes of JSON error bodies.
const (
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeMalformedJSON    = "malformed_json"
	CodeUnknownField     = "unknown_field"
	CodeBadValue         = "bad_value"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnavailable      = "unavailable"
	CodeUnsupported      = "unsupported"
	CodeMediaType        = "unsupported_media_type"
	CodeInternal         = "internal"
)

// kinds maps the kinds of control's errors to their status and code, both
// ways: the server answers a kind with its status, the client gives the
// kind back from the code.
var kinds = []struct {
	kind   error
	status int
	code   string
}{
	{control.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{control.ErrBadValue, http.StatusBadRequest, CodeBadValue},
	{control.ErrConflict, http.StatusConflict, CodeConflict},
	{control.ErrUnavailable, http.StatusServiceUnavailable, CodeUnavailable},
	{control.ErrUnsupported, http.StatusNotImplemented, CodeUnsupported},
}

// statusOf is the status and code of a kind of service error.
func statusOf(kind error) (int, string) {
	for _, k := range kinds {
		if k.kind == kind {
			return k.status, k.code
		}
	}
	return http.StatusInternalServerError, CodeInternal
}

// Error is an API error: the JSON body {"error": "...", "code": "..."} and
// the HTTP status it came with. It wraps the kind of control error its code
// names (a malformed request is control.ErrBadValue too), so errors.Is
// works alike on an answer from a scheduler and on a local one.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.Status, e.Code)
}

// Unwrap is the kind of control error the code names, or nil.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeMalformedJSON, CodeUnknownField, CodeTooLarge, CodeMediaType:
		return control.ErrBadValue
	}
	for _, k := range kinds {
		if k.code == e.Code {
			return k.kind
		}
	}
	return nil
}

func apiError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}
