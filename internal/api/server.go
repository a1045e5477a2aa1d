package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
)

// Server defaults.
const (
	// DefaultMaxBody bounds a request body.
	DefaultMaxBody = 1 << 20
	// DefaultCommandTimeout bounds how long a state-changing request waits
	// for the campaign's driver.
	DefaultCommandTimeout = control.CommandTimeout
)

// Options configures the HTTP server.
type Options struct {
	// Service is what the API serves (a scheduler's control.Campaigns);
	// when it is also a control.Fleet, its workers, queues and health.
	Service control.Service
	// Token is the bearer token every state-changing request must carry.
	// It is required.
	Token string
	// Metrics serves GET /metrics (404 when nil).
	Metrics http.Handler
	Logger  *slog.Logger
	// Now is the clock of service discovery's memory (time.Now when nil).
	Now func() time.Time
	// MaxBody and CommandTimeout default to DefaultMaxBody and
	// DefaultCommandTimeout when zero.
	MaxBody        int64
	CommandTimeout time.Duration
	// ModelsDir is where the files a request may name (a config.json as
	// "model", a safetensors file as "weights") must lie, named relative to
	// it; empty allows presets only (model.ResolveUnder).
	ModelsDir string
}

type server struct {
	Options
	fleet control.Fleet // nil: no workers, queues or health to report
	token []byte
	sd    sdMemory
}

// handlerFunc serves one method of one route; a non-nil error is written as
// a JSON error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

type methods map[string]handlerFunc

// NewServer returns the API's HTTP handler.
func NewServer(o Options) (http.Handler, error) {
	if o.Service == nil {
		return nil, errors.New("api: no service")
	}
	if err := control.CheckAPIToken(o.Token); err != nil {
		return nil, fmt.Errorf("api: a bearer token is required: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	s := &server{Options: o, token: []byte(o.Token)}
	s.fleet, _ = o.Service.(control.Fleet)
	mux := http.NewServeMux()
	routes := map[string]methods{
		"/healthz":                          {"GET": s.health},
		"/metrics":                          {"GET": s.metrics},
		"/v1/campaigns":                     {"GET": s.list, "POST": s.create},
		"/v1/campaigns/{id}":                {"GET": s.status},
		"/v1/campaigns/{id}/next":           {"GET": s.next},
		"/v1/campaigns/{id}/report":         {"GET": s.report, "POST": s.writeReport},
		"/v1/campaigns/{id}/trials/{trial}": {"GET": s.trial},
		"/v1/campaigns/{id}/record":         {"POST": s.record},
		"/v1/campaigns/{id}/pause":          {"POST": s.command(campaign.OpPause)},
		"/v1/campaigns/{id}/resume":         {"POST": s.command(campaign.OpResume)},
		"/v1/campaigns/{id}/stop":           {"POST": s.command(campaign.OpStop)},
		"/v1/campaigns/{id}/reopen":         {"POST": s.command(campaign.OpReopen)},
		"/v1/campaigns/{id}/note":           {"POST": s.command(campaign.OpNote)},
		"/v1/campaigns/{id}/budget":         {"PUT": s.budget},
		"/v1/campaigns/{id}/criteria":       {"PUT": s.criteria},
		"/v1/workers":                       {"GET": s.workers},
		"/v1/sd/workers":                    {"GET": s.serviceDiscovery},
		"/v1/queues":                        {"GET": s.queues},
		"/{path...}":                        {},
	}
	for pattern, ms := range routes {
		mux.Handle(pattern, s.route(ms))
	}
	return s.logged(mux), nil
}

// route dispatches on the method, enforces the token on state-changing
// methods and writes errors as JSON.
func (s *server) route(ms methods) http.Handler {
	allowed := make([]string, 0, len(ms))
	for m := range ms {
		allowed = append(allowed, m)
	}
	sort.Strings(allowed)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(ms) == 0 {
			s.fail(w, r, apiError(http.StatusNotFound, CodeNotFound, "no such endpoint: %s", r.URL.Path))
			return
		}
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet
		}
		h, ok := ms[method]
		if !ok {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			s.fail(w, r, apiError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allowed, ", ")))
			return
		}
		if method != http.MethodGet && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="amk"`)
			s.fail(w, r, apiError(http.StatusUnauthorized, CodeUnauthorized, "a valid bearer token is required to change state (Authorization: Bearer <token>)"))
			return
		}
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// authorized compares the bearer token in constant time.
func (s *server) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), s.token) == 1
}

// fail writes err as a JSON error; service errors get the status of their
// kind (control.KindOf), and unexpected ones are logged and hidden.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = classify(err)
	}
	if e.Status >= 500 {
		s.Logger.Error("api request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	writeJSON(w, e.Status, e)
}

// classify maps a service error to an API error by its kind.
func classify(err error) *Error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return apiError(http.StatusServiceUnavailable, CodeUnavailable, "%v (retry later)", err)
	case control.KindOf(err) == nil:
		return apiError(http.StatusInternalServerError, CodeInternal, "internal error: %v", err)
	}
	status, code := statusOf(control.KindOf(err))
	msg := err.Error()
	if status == http.StatusServiceUnavailable {
		msg += " (retry later)"
	}
	return &Error{Status: status, Code: code, Message: msg}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error": "encoding the response failed", "code": "internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

func writeText(w http.ResponseWriter, contentType, text string) {
	w.Header().Set("Content-Type", contentType+"; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = io.WriteString(w, text)
}

// decode reads a JSON body into v: declared as JSON (or undeclared),
// size-limited, unknown fields refused, no key twice (encoding/json would
// keep the last one, and matches keys without regard to case, so "Name" and
// "name" count as one key), exactly one value. An empty body is accepted
// when optional.
func (s *server) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return apiError(http.StatusUnsupportedMediaType, CodeMediaType, "Content-Type %q is not application/json", ct)
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.MaxBody))
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
		if err == nil {
			var extra json.RawMessage
			if err2 := dec.Decode(&extra); !errors.Is(err2, io.EOF) {
				return apiError(http.StatusBadRequest, CodeMalformedJSON, "malformed JSON: data after the request object")
			}
			if tree, perr := pyjson.Parse(body); perr == nil {
				if d := pyjson.FindDuplicateKeyFold(tree); d != nil {
					return apiError(http.StatusBadRequest, CodeMalformedJSON, "malformed JSON: %v", d)
				}
			}
			return nil
		}
	}
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF) && optional:
		return nil
	case errors.Is(err, io.EOF):
		return apiError(http.StatusBadRequest, CodeMalformedJSON, "malformed JSON: the request body is empty")
	case errors.As(err, &tooLarge):
		return apiError(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body larger than %d bytes", s.MaxBody)
	case errors.As(err, &syntax):
		return apiError(http.StatusBadRequest, CodeMalformedJSON, "malformed JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return apiError(http.StatusBadRequest, CodeMalformedJSON, "malformed JSON: the body must be a JSON object, not %s", typ.Value)
		}
		return apiError(http.StatusBadRequest, CodeBadValue, "field %q: %s is not a valid %s", field, typ.Value, typ.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return apiError(http.StatusBadRequest, CodeUnknownField, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return apiError(http.StatusBadRequest, CodeMalformedJSON, "malformed JSON: %v", err)
}

// format reads ?format=, which must be one of allowed (the first is the
// default).
func format(r *http.Request, allowed ...string) (string, error) {
	f := r.URL.Query().Get("format")
	if f == "" {
		return allowed[0], nil
	}
	if !slices.Contains(allowed, f) {
		return "", apiError(http.StatusBadRequest, CodeBadValue, "format %q is not one of %s", f, strings.Join(allowed, ", "))
	}
	return f, nil
}

func (s *server) now() time.Time { return s.Now().UTC() }

// commandContext bounds a state-changing request by the command timeout.
func (s *server) commandContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.CommandTimeout)
}

// timedOut says a state-changing request ran out of the command timeout
// (and not because its client went away).
func (s *server) timedOut(r *http.Request, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		return apiError(http.StatusServiceUnavailable, CodeUnavailable, "campaign %s did not answer within %s (its driver may be restarting); retry later", r.PathValue("id"), s.CommandTimeout)
	}
	return err
}

func (s *server) health(w http.ResponseWriter, r *http.Request) error {
	if s.fleet != nil {
		if err := s.fleet.Health(r.Context()); err != nil {
			return apiError(http.StatusServiceUnavailable, CodeUnavailable, "unhealthy: %v", err)
		}
	}
	list, _ := s.Service.List(r.Context())
	writeJSON(w, http.StatusOK, control.Health{Status: "ok", Campaigns: len(list)})
	return nil
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) error {
	if s.Metrics == nil {
		return apiError(http.StatusNotFound, CodeNotFound, "this server exports no metrics")
	}
	s.Metrics.ServeHTTP(w, r)
	return nil
}

func (s *server) list(w http.ResponseWriter, r *http.Request) error {
	out, err := s.Service.List(r.Context())
	if err != nil && out == nil {
		return err
	}
	if err != nil {
		s.Logger.Warn("campaigns left out of the list", "err", err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) create(w http.ResponseWriter, r *http.Request) error {
	var req control.CreateRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if err := s.confineFiles(&req); err != nil {
		return err
	}
	ctx, cancel := s.commandContext(r)
	defer cancel()
	resp, err := s.Service.Create(ctx, req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if resp.Created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/campaigns/"+resp.ID)
	}
	writeJSON(w, status, resp)
	return nil
}

// confineFiles resolves the request's model and weights under ModelsDir:
// presets pass, files must lie inside the directory (the API never opens a
// path the operator did not put there, nor says whether one exists).
func (s *server) confineFiles(req *control.CreateRequest) error {
	m, err := model.ResolveUnder("model", strings.TrimSpace(req.Model), s.ModelsDir, true)
	if err != nil {
		return apiError(http.StatusBadRequest, CodeBadValue, "%v", err)
	}
	req.Model = m
	if req.Weights != "" {
		w, err := model.ResolveUnder("weights", req.Weights, s.ModelsDir, false)
		if err != nil {
			return apiError(http.StatusBadRequest, CodeBadValue, "%v", err)
		}
		req.Weights = w
	}
	return nil
}

func (s *server) status(w http.ResponseWriter, r *http.Request) error {
	f, err := format(r, "json", "text")
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if f == "text" {
		text, err := s.Service.StatusText(r.Context(), id)
		if err != nil {
			return err
		}
		writeText(w, "text/plain", text)
		return nil
	}
	rep, err := s.Service.Status(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// trial serves one trial of a campaign (control.TrialReport).
func (s *server) trial(w http.ResponseWriter, r *http.Request) error {
	n, err := strconv.Atoi(r.PathValue("trial"))
	if err != nil || n < 0 {
		return control.Errorf(control.ErrBadValue, "trial %q: a trial is a number, 0 or more", r.PathValue("trial"))
	}
	rep, err := s.Service.Trial(r.Context(), r.PathValue("id"), n)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (s *server) next(w http.ResponseWriter, r *http.Request) error {
	f, err := format(r, "json", "text")
	if err != nil {
		return err
	}
	n, err := s.Service.Next(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if f == "text" {
		writeText(w, "text/plain", n.Text())
		return nil
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

// report serves the wake-up report: JSON, its markdown (md) or the
// aggregate campaign report (aggregate).
func (s *server) report(w http.ResponseWriter, r *http.Request) error {
	f, err := format(r, "json", "md", "aggregate")
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if f == "aggregate" {
		md, err := s.Service.AggregateReport(r.Context(), id)
		if err != nil {
			return err
		}
		writeText(w, "text/markdown", md)
		return nil
	}
	wake, err := s.Service.Report(r.Context(), id)
	if err != nil {
		return err
	}
	if f == "md" {
		writeText(w, "text/markdown", wake.Markdown())
		return nil
	}
	writeJSON(w, http.StatusOK, wake)
	return nil
}

func (s *server) writeReport(w http.ResponseWriter, r *http.Request) error {
	var none struct{}
	if err := s.decode(w, r, &none, true); err != nil {
		return err
	}
	files, err := s.Service.WriteReport(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, files)
	return nil
}

func (s *server) record(w http.ResponseWriter, r *http.Request) error {
	var req control.RecordRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	ctx, cancel := s.commandContext(r)
	defer cancel()
	resp, err := s.Service.Record(ctx, r.PathValue("id"), req)
	if err != nil {
		return s.timedOut(r, err)
	}
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

// command serves an operator command whose body is a
// control.CommandRequest (optional: an empty body is no note, no budget).
func (s *server) command(op string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req control.CommandRequest
		if err := s.decode(w, r, &req, true); err != nil {
			return err
		}
		return s.apply(w, r, op, req)
	}
}

// budget serves PUT .../budget, whose body is the budget itself.
func (s *server) budget(w http.ResponseWriter, r *http.Request) error {
	var b campaign.Budget
	if err := s.decode(w, r, &b, false); err != nil {
		return err
	}
	return s.apply(w, r, campaign.OpBudget, control.CommandRequest{Budget: &b})
}

// criteria serves PUT .../criteria, whose body is the overrides
// themselves.
func (s *server) criteria(w http.ResponseWriter, r *http.Request) error {
	var m control.MoveOn
	if err := s.decode(w, r, &m, false); err != nil {
		return err
	}
	return s.apply(w, r, campaign.OpCriteria, control.CommandRequest{MoveOn: &m})
}

// apply runs a command and answers with the campaign afterwards.
func (s *server) apply(w http.ResponseWriter, r *http.Request, op string, req control.CommandRequest) error {
	ctx, cancel := s.commandContext(r)
	defer cancel()
	resp, err := s.Service.Command(ctx, r.PathValue("id"), op, req)
	if err != nil {
		return s.timedOut(r, err)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *server) workers(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.listWorkers(r.Context())
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}

// listWorkers is the fleet's live workers ([] for none).
func (s *server) listWorkers(ctx context.Context) ([]control.Worker, error) {
	if s.fleet == nil {
		return nil, control.Errorf(control.ErrUnsupported, "this server has no worker registry")
	}
	ws, err := s.fleet.Workers(ctx)
	if ws == nil && err == nil {
		ws = []control.Worker{}
	}
	return ws, err
}

func (s *server) queues(w http.ResponseWriter, r *http.Request) error {
	if s.fleet == nil {
		return control.Errorf(control.ErrUnsupported, "queues: this server has no queues")
	}
	qs, err := s.fleet.Queues(r.Context())
	if err != nil {
		return fmt.Errorf("queues: %w", err)
	}
	if qs == nil {
		qs = []control.Queue{}
	}
	writeJSON(w, http.StatusOK, qs)
	return nil
}

// logged logs every request at debug level (never its headers or body).
func (s *server) logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		s.Logger.Debug("api request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"took", time.Since(start).Round(time.Microsecond))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
