package api

import (
	"errors"
	"fmt"
	"net/http"
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

// Error is an API error: the JSON body {"error": "...", "code": "..."} and
// the HTTP status it came with.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.Status, e.Code)
}

// Sentinel errors a Service returns (wrapped) so the server picks the status.
var (
	// ErrNotFound: no campaign with that id (404).
	ErrNotFound = errors.New("no such campaign")
	// ErrBadValue: a request field has a value the service refuses (400).
	ErrBadValue = errors.New("bad value")
	// ErrConflict: the request conflicts with the campaign's situation,
	// e.g. another process drives it (409).
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: the campaign's driver or the transport cannot serve
	// the request now; retry later (503).
	ErrUnavailable = errors.New("unavailable")
	// ErrUnsupported: this service has no such facility, e.g. workers of an
	// in-process transport (501).
	ErrUnsupported = errors.New("not supported by this scheduler")
)

func apiError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func notFound(id string) *Error {
	return apiError(http.StatusNotFound, CodeNotFound, "no campaign %q (list them with GET /v1/campaigns)", id)
}
