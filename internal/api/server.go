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
	"math"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
)

// Server defaults.
const (
	// DefaultMaxBody bounds a request body.
	DefaultMaxBody = 1 << 20
	// DefaultCommandTimeout bounds how long a state-changing request waits
	// for the campaign's driver.
	DefaultCommandTimeout = 15 * time.Second
)

// Options configures the HTTP server.
type Options struct {
	Service Service
	// Token is the bearer token every state-changing request must carry.
	// It is required.
	Token string
	// Metrics serves GET /metrics (404 when nil).
	Metrics http.Handler
	Logger  *slog.Logger
	// Now is the clock of events and reports (time.Now when nil).
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
	if strings.TrimSpace(o.Token) == "" {
		return nil, errors.New("api: a bearer token is required")
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
	mux := http.NewServeMux()
	routes := map[string]methods{
		"/healthz":                    {"GET": s.health},
		"/metrics":                    {"GET": s.metrics},
		"/v1/campaigns":               {"GET": s.list, "POST": s.create},
		"/v1/campaigns/{id}":          {"GET": s.status},
		"/v1/campaigns/{id}/next":     {"GET": s.next},
		"/v1/campaigns/{id}/report":   {"GET": s.report, "POST": s.writeReport},
		"/v1/campaigns/{id}/record":   {"POST": s.record},
		"/v1/campaigns/{id}/pause":    {"POST": s.command(campaign.OpPause)},
		"/v1/campaigns/{id}/resume":   {"POST": s.command(campaign.OpResume)},
		"/v1/campaigns/{id}/stop":     {"POST": s.command(campaign.OpStop)},
		"/v1/campaigns/{id}/reopen":   {"POST": s.command(campaign.OpReopen)},
		"/v1/campaigns/{id}/budget":   {"PUT": s.budget},
		"/v1/campaigns/{id}/criteria": {"PUT": s.criteria},
		"/v1/workers":                 {"GET": s.workers},
		"/v1/sd/workers":              {"GET": s.serviceDiscovery},
		"/v1/queues":                  {"GET": s.queues},
		"/{path...}":                  {},
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

// fail writes err as a JSON error; errors that are not *Error are mapped by
// their sentinel, and unexpected ones are logged and hidden.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = s.classify(err, false)
	}
	if e.Status >= 500 {
		s.Logger.Error("api request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	writeJSON(w, e.Status, e)
}

// classify maps a service error to an API error. For operator commands a
// refused event is a conflict with the campaign's state; for records and
// settings it is a bad value.
func (s *server) classify(err error, command bool) *Error {
	switch {
	case errors.Is(err, ErrNotFound):
		return apiError(http.StatusNotFound, CodeNotFound, "%v", err)
	case errors.Is(err, ErrBadValue):
		return apiError(http.StatusBadRequest, CodeBadValue, "%v", err)
	case errors.Is(err, ErrConflict), errors.Is(err, campaign.ErrDone):
		return apiError(http.StatusConflict, CodeConflict, "%v", err)
	case errors.Is(err, campaign.ErrInvalid) && command:
		return apiError(http.StatusConflict, CodeConflict, "%v", err)
	case errors.Is(err, campaign.ErrInvalid):
		return apiError(http.StatusBadRequest, CodeBadValue, "%v", err)
	case errors.Is(err, ErrUnsupported):
		return apiError(http.StatusNotImplemented, CodeUnsupported, "%v", err)
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return apiError(http.StatusServiceUnavailable, CodeUnavailable, "%v (retry later)", err)
	}
	return apiError(http.StatusInternalServerError, CodeInternal, "internal error: %v", err)
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

// read runs fn on the campaign named by the path.
func (s *server) read(r *http.Request, fn func(c *campaign.Campaign)) error {
	id := r.PathValue("id")
	if campaign.ValidID(id) != nil {
		return notFound(id)
	}
	if err := s.Service.Read(id, fn); err != nil {
		if errors.Is(err, ErrNotFound) {
			return notFound(id)
		}
		return err
	}
	return nil
}

// do applies an event to the campaign named by the path, bounded by the
// command timeout.
func (s *server) do(r *http.Request, ev campaign.Event, command bool) (campaign.Decision, error) {
	id := r.PathValue("id")
	if campaign.ValidID(id) != nil {
		return campaign.Decision{}, notFound(id)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.CommandTimeout)
	defer cancel()
	dec, err := s.Service.Do(ctx, id, ev)
	switch {
	case err == nil:
		return dec, nil
	case errors.Is(err, ErrNotFound):
		return dec, notFound(id)
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		return dec, apiError(http.StatusServiceUnavailable, CodeUnavailable, "campaign %s did not answer within %s (its driver may be restarting); retry later", id, s.CommandTimeout)
	}
	return dec, s.classify(err, command)
}

func (s *server) health(w http.ResponseWriter, r *http.Request) error {
	if err := s.Service.Health(r.Context()); err != nil {
		return apiError(http.StatusServiceUnavailable, CodeUnavailable, "unhealthy: %v", err)
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok", Campaigns: len(s.Service.IDs())})
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
	now := s.now()
	out := []campaign.StatusReport{}
	for _, id := range s.Service.IDs() {
		err := s.Service.Read(id, func(c *campaign.Campaign) { out = append(out, c.StatusReport(now)) })
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) create(w http.ResponseWriter, r *http.Request) error {
	var req CreateRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if err := checkCreate(&req); err != nil {
		return err
	}
	if err := s.confineFiles(&req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.CommandTimeout)
	defer cancel()
	id, created, workers, err := s.Service.Create(ctx, req)
	if err != nil {
		return s.classify(err, false)
	}
	resp := CreateResponse{ID: id, Created: created, Workers: workers}
	if err := s.Service.Read(id, func(c *campaign.Campaign) { resp.Campaign = c.StatusReport(s.now()) }); err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/campaigns/"+id)
	}
	writeJSON(w, status, resp)
	return nil
}

// checkCreate validates what can be checked without the service and fills
// the device default.
func checkCreate(req *CreateRequest) error {
	bad := func(format string, args ...any) error {
		return apiError(http.StatusBadRequest, CodeBadValue, format, args...)
	}
	req.Model, req.GPU = strings.TrimSpace(req.Model), strings.ToLower(strings.TrimSpace(req.GPU))
	device, deviceErr := schedule.ParseDevice(string(req.Device))
	req.Device = device
	switch {
	case req.Model == "":
		return bad("field \"model\" is required (a preset name or a config.json path)")
	case req.GPU == "":
		return bad("field \"gpu\" is required (a GPU target, e.g. h100)")
	case deviceErr != nil:
		return bad("field \"device\": %v", deviceErr)
	case req.Workers < 0 || req.Workers > MaxWorkers:
		return bad("field \"workers\": %d is not in 0..%d", req.Workers, MaxWorkers)
	case req.Batch != nil && (*req.Batch < 1 || *req.Batch > schedule.MaxBatch):
		return bad("field \"batch\": %d is not in 1..%d", *req.Batch, schedule.MaxBatch)
	}
	if _, err := req.ResolvedWorkload(); err != nil {
		return bad("field \"workload\": %v", err)
	}
	if req.Budget != nil {
		if err := checkBudget(*req.Budget); err != nil {
			return err
		}
	}
	return checkMoveOn(req.MoveOn)
}

// confineFiles resolves the request's model and weights under ModelsDir:
// presets pass, files must lie inside the directory (the API never opens a
// path the operator did not put there, nor says whether one exists).
func (s *server) confineFiles(req *CreateRequest) error {
	m, err := model.ResolveUnder("model", req.Model, s.ModelsDir, true)
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

// MaxWorkers bounds a campaign's trials in flight.
const MaxWorkers = 256

func checkBudget(b campaign.Budget) error {
	if b.Iterations < 0 || math.IsNaN(b.Minutes) || math.IsInf(b.Minutes, 0) || b.Minutes < 0 {
		return apiError(http.StatusBadRequest, CodeBadValue, "budget: iterations and minutes must be non-negative numbers (0 = unbounded)")
	}
	return nil
}

func checkMoveOn(m *MoveOn) error {
	if m == nil {
		return nil
	}
	if m.ConsecutiveReverts != nil && *m.ConsecutiveReverts < 0 {
		return apiError(http.StatusBadRequest, CodeBadValue, "move_on.consecutive_reverts must be non-negative")
	}
	for name, v := range map[string]*float64{"pct_roofline_target": m.PctRooflineTarget, "max_minutes": m.MaxMinutes, "speedup_target": m.SpeedupTarget} {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) {
			return apiError(http.StatusBadRequest, CodeBadValue, "move_on.%s must be a non-negative number", name)
		}
	}
	return nil
}

func (s *server) status(w http.ResponseWriter, r *http.Request) error {
	f, err := format(r, "json", "text")
	if err != nil {
		return err
	}
	now := s.now()
	var rep campaign.StatusReport
	var text string
	if err := s.read(r, func(c *campaign.Campaign) {
		if f == "text" {
			text = c.StatusText(now)
		} else {
			rep = c.StatusReport(now)
		}
	}); err != nil {
		return err
	}
	if f == "text" {
		writeText(w, "text/plain", text)
		return nil
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (s *server) next(w http.ResponseWriter, r *http.Request) error {
	f, err := format(r, "json", "text")
	if err != nil {
		return err
	}
	var n campaign.NextReport
	if err := s.read(r, func(c *campaign.Campaign) { n = c.Next(s.now()) }); err != nil {
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
	now := s.now()
	var wake campaign.WakeUp
	var agg string
	if err := s.read(r, func(c *campaign.Campaign) {
		wake = c.WakeUp(now)
		if f == "aggregate" {
			agg = c.ReportMarkdown(now)
		}
	}); err != nil {
		return err
	}
	switch f {
	case "md":
		writeText(w, "text/markdown", wake.Markdown())
	case "aggregate":
		writeText(w, "text/markdown", agg)
	default:
		writeJSON(w, http.StatusOK, wake)
	}
	return nil
}

func (s *server) writeReport(w http.ResponseWriter, r *http.Request) error {
	var none struct{}
	if err := s.decode(w, r, &none, true); err != nil {
		return err
	}
	id := r.PathValue("id")
	files, err := s.Service.WriteReport(id)
	if errors.Is(err, ErrNotFound) {
		return notFound(id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, files)
	return nil
}

func (s *server) record(w http.ResponseWriter, r *http.Request) error {
	var req RecordRequest
	if err := s.decode(w, r, &req, false); err != nil {
		return err
	}
	if strings.TrimSpace(req.Status) == "" {
		return apiError(http.StatusBadRequest, CodeBadValue, "field \"status\" is required (kept, revert, tried, failed, crash, timeout, rejected or baseline)")
	}
	dec, err := s.do(r, req.Event(s.now()), false)
	if err != nil {
		return err
	}
	resp := RecordResponse{ID: r.PathValue("id"), Rows: dec.Rows, Log: dec.Log}
	if resp.Rows == nil {
		resp.Rows = []flywheel.Row{}
	}
	if err := s.read(r, func(c *campaign.Campaign) { resp.Campaign = c.StatusReport(s.now()) }); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

func (s *server) command(op string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req CommandRequest
		if err := s.decode(w, r, &req, true); err != nil {
			return err
		}
		if op != campaign.OpReopen && (req.Budget != nil || req.MoveOn != nil) {
			return apiError(http.StatusBadRequest, CodeBadValue, "budget and move_on go with reopen only (change a live campaign's budget with PUT .../budget)")
		}
		ev := campaign.Command{Time: s.now(), Op: op, Note: req.Note, Budget: req.Budget}
		if req.Budget != nil {
			if err := checkBudget(*req.Budget); err != nil {
				return err
			}
		}
		if req.MoveOn != nil {
			mo, err := s.criteriaOver(r, req.MoveOn)
			if err != nil {
				return err
			}
			ev.MoveOn = &mo
		}
		return s.apply(w, r, ev, true)
	}
}

func (s *server) budget(w http.ResponseWriter, r *http.Request) error {
	var b campaign.Budget
	if err := s.decode(w, r, &b, false); err != nil {
		return err
	}
	if err := checkBudget(b); err != nil {
		return err
	}
	return s.apply(w, r, campaign.Command{Time: s.now(), Op: campaign.OpBudget, Budget: &b}, false)
}

func (s *server) criteria(w http.ResponseWriter, r *http.Request) error {
	var m MoveOn
	if err := s.decode(w, r, &m, false); err != nil {
		return err
	}
	mo, err := s.criteriaOver(r, &m)
	if err != nil {
		return err
	}
	return s.apply(w, r, campaign.Command{Time: s.now(), Op: campaign.OpCriteria, MoveOn: &mo}, false)
}

// criteriaOver applies overrides to the campaign's current criteria.
func (s *server) criteriaOver(r *http.Request, m *MoveOn) (campaign.MoveOn, error) {
	if err := checkMoveOn(m); err != nil {
		return campaign.MoveOn{}, err
	}
	var cur campaign.MoveOn
	if err := s.read(r, func(c *campaign.Campaign) { cur = c.State().Settings.MoveOn }); err != nil {
		return cur, err
	}
	return m.Over(cur), nil
}

// apply runs a command and answers with the campaign afterwards.
func (s *server) apply(w http.ResponseWriter, r *http.Request, ev campaign.Command, command bool) error {
	dec, err := s.do(r, ev, command)
	if err != nil {
		return err
	}
	resp := CommandResponse{ID: r.PathValue("id"), Log: dec.Log}
	if resp.Log == nil {
		resp.Log = []string{}
	}
	if err := s.read(r, func(c *campaign.Campaign) { resp.Campaign = c.StatusReport(s.now()) }); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *server) workers(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.Service.Workers(r.Context())
	if err != nil {
		return s.classify(fmt.Errorf("workers: %w", err), false)
	}
	if ws == nil {
		ws = []Worker{}
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}

func (s *server) queues(w http.ResponseWriter, r *http.Request) error {
	qs, err := s.Service.Queues(r.Context())
	if err != nil {
		return s.classify(fmt.Errorf("queues: %w", err), false)
	}
	if qs == nil {
		qs = []Queue{}
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
