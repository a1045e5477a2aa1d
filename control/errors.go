package control

import (
	"errors"
	"fmt"
)

// The kinds of service errors. Every error of an operation that is not a
// plain failure of the machine wraps one of them (errors.Is), whichever
// implementation answered: the HTTP API picks its status by them and its
// client gives them back, so a caller tests errors.Is(err,
// control.ErrConflict) alike against a workspace, a fleet or a scheduler
// across the network.
var (
	// ErrNotFound: no campaign with that id (HTTP 404).
	ErrNotFound = errors.New("no such campaign")
	// ErrBadValue: a request field has a value that is refused, or the
	// campaign refused a record or a setting (HTTP 400).
	ErrBadValue = errors.New("bad value")
	// ErrConflict: the request conflicts with the campaign's situation:
	// its state refuses the command (pause a paused campaign, record into
	// a done one), or another process drives it (HTTP 409).
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: the campaign's driver or the transport cannot serve
	// the request now; retry later (HTTP 503).
	ErrUnavailable = errors.New("unavailable")
	// ErrUnsupported: this implementation has no such facility, e.g. the
	// workers of campaigns evaluated in process (HTTP 501).
	ErrUnsupported = errors.New("not supported here")
)

// Kinds are the error kinds, for fronts that map them.
var Kinds = []error{ErrNotFound, ErrBadValue, ErrConflict, ErrUnavailable, ErrUnsupported}

// KindOf is the kind err wraps, or nil.
func KindOf(err error) error {
	for _, k := range Kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// Error is a service error: its message is for a person (the kind's own
// text is not in it); it wraps its Kind and the error it comes from.
type Error struct {
	Kind error
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap gives the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Errorf is a service error of kind with a formatted message; a %w in the
// format wraps its operand too.
func Errorf(kind error, format string, args ...any) error {
	cause := fmt.Errorf(format, args...)
	return &Error{Kind: kind, Msg: cause.Error(), Err: errors.Unwrap(cause)}
}

func badValue(format string, args ...any) error { return Errorf(ErrBadValue, format, args...) }

// notFound is the error of a campaign id that names none.
func notFound(id, where string) error {
	return Errorf(ErrNotFound, "no campaign %q %s (list them with amkctl campaigns)", id, where)
}
