package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
)

var (
	_ control.Service = (*Client)(nil)
	_ control.Fleet   = (*Client)(nil)
)

// maxResponse bounds a response body the client reads.
const maxResponse = 64 << 20

// Client is a scheduler's campaigns across its HTTP API: a control.Service
// and control.Fleet, so that what works on a workspace works on a
// scheduler. Its errors are *Error, wrapping the kind of control error
// the scheduler answered with.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// ConnError means the scheduler could not be reached at all.
type ConnError struct {
	Server string
	Err    error
}

func (e *ConnError) Error() string {
	if errors.Is(e.Err, syscall.ECONNREFUSED) {
		return fmt.Sprintf("cannot reach the scheduler at %s: connection refused (is it running? check --server or AMK_SERVER)", e.Server)
	}
	return fmt.Sprintf("cannot reach the scheduler at %s: %v", e.Server, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }

// NewClient returns a client of the scheduler at server ("http://host:port"
// or "host:port"). token is sent as a bearer token when not empty; hc nil
// means a client with a 60 s timeout.
func NewClient(server, token string, hc *http.Client) (*Client, error) {
	raw := strings.TrimSpace(server)
	if raw == "" {
		return nil, errors.New("no scheduler URL (use --server URL or AMK_SERVER)")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("scheduler URL %q: %v", server, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("scheduler URL %q: want http://host:port or https://host:port", server)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &Client{base: u, token: strings.TrimSpace(token), http: hc}, nil
}

// Server is the scheduler's base URL.
func (c *Client) Server() string { return c.base.String() }

func campaignPath(id string, parts ...string) string {
	var p strings.Builder
	p.WriteString("/v1/campaigns/" + url.PathEscape(id))
	for _, s := range parts {
		p.WriteString("/" + s)
	}
	return p.String()
}

// onCampaign sends one request about campaign id (a path under it made of
// parts); an id no campaign can have is not found without asking.
func (c *Client) onCampaign(ctx context.Context, method, id string, parts []string, query url.Values, body, out any) error {
	if campaign.ValidID(id) != nil {
		return control.Errorf(control.ErrNotFound, "no campaign %q %s", id, c.Where())
	}
	return c.do(ctx, method, campaignPath(id, parts...), query, body, out)
}

// do sends one request. A body of nil sends none; out nil discards the
// response; a *string out receives the raw text.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &ConnError{Server: c.Server(), Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return &ConnError{Server: c.Server(), Err: err}
	}
	if resp.StatusCode >= 300 {
		return responseError(resp.StatusCode, data)
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *string:
		*o = string(data)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("scheduler %s: unexpected response to %s %s: %v", c.Server(), method, path, err)
	}
	return nil
}

// responseError reads a JSON error body, or wraps whatever came instead.
func responseError(status int, data []byte) error {
	var e Error
	if json.Unmarshal(data, &e) == nil && e.Message != "" {
		e.Status = status
		return &e
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Status: status, Code: fmt.Sprintf("http_%d", status), Message: msg}
}

func textQuery(format string) url.Values { return url.Values{"format": {format}} }

// Where names the scheduler.
func (c *Client) Where() string { return "on the scheduler at " + c.Server() }

// Healthz answers GET /healthz.
func (c *Client) Healthz(ctx context.Context) (control.Health, error) {
	var h control.Health
	return h, c.do(ctx, http.MethodGet, "/healthz", nil, nil, &h)
}

// Health is nil while the scheduler answers /healthz with ok.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.Healthz(ctx)
	return err
}

// List is every campaign's status.
func (c *Client) List(ctx context.Context) ([]campaign.StatusReport, error) {
	var out []campaign.StatusReport
	return out, c.do(ctx, http.MethodGet, "/v1/campaigns", nil, nil, &out)
}

// Create starts a campaign, or returns the existing one.
func (c *Client) Create(ctx context.Context, req control.CreateRequest) (control.CreateResponse, error) {
	var out control.CreateResponse
	return out, c.do(ctx, http.MethodPost, "/v1/campaigns", nil, req, &out)
}

// Status is a campaign's status.
func (c *Client) Status(ctx context.Context, id string) (campaign.StatusReport, error) {
	var out campaign.StatusReport
	return out, c.onCampaign(ctx, http.MethodGet, id, nil, nil, nil, &out)
}

// StatusText is a campaign's status as amkctl status prints it.
func (c *Client) StatusText(ctx context.Context, id string) (string, error) {
	var out string
	return out, c.onCampaign(ctx, http.MethodGet, id, nil, textQuery("text"), nil, &out)
}

// Next is a campaign's continue-or-stop decision.
func (c *Client) Next(ctx context.Context, id string) (campaign.NextReport, error) {
	var out campaign.NextReport
	return out, c.onCampaign(ctx, http.MethodGet, id, []string{"next"}, nil, nil, &out)
}

// Report is a campaign's wake-up report.
func (c *Client) Report(ctx context.Context, id string) (campaign.WakeUp, error) {
	var out campaign.WakeUp
	return out, c.onCampaign(ctx, http.MethodGet, id, []string{"report"}, nil, nil, &out)
}

// AggregateReport is the campaign report as markdown.
func (c *Client) AggregateReport(ctx context.Context, id string) (string, error) {
	var out string
	return out, c.onCampaign(ctx, http.MethodGet, id, []string{"report"}, textQuery("aggregate"), nil, &out)
}

// Trial is one trial of a campaign.
func (c *Client) Trial(ctx context.Context, id string, trialID int) (control.TrialReport, error) {
	var out control.TrialReport
	return out, c.onCampaign(ctx, http.MethodGet, id, []string{"trials", strconv.Itoa(trialID)}, nil, nil, &out)
}

// WriteReport has the scheduler write the campaign's report files.
func (c *Client) WriteReport(ctx context.Context, id string) (control.ReportFiles, error) {
	var out control.ReportFiles
	return out, c.onCampaign(ctx, http.MethodPost, id, []string{"report"}, nil, nil, &out)
}

// Command sends an operator command: PUT .../budget and .../criteria with
// the budget or the criteria as the body, POST .../OP with the request
// otherwise. A request the command does not take is refused before it is
// sent.
func (c *Client) Command(ctx context.Context, id, op string, req control.CommandRequest) (control.CommandResponse, error) {
	var out control.CommandResponse
	if err := req.Check(op); err != nil {
		return out, err
	}
	switch op {
	case campaign.OpBudget:
		return out, c.onCampaign(ctx, http.MethodPut, id, []string{"budget"}, nil, req.Budget, &out)
	case campaign.OpCriteria:
		return out, c.onCampaign(ctx, http.MethodPut, id, []string{"criteria"}, nil, req.MoveOn, &out)
	}
	return out, c.onCampaign(ctx, http.MethodPost, id, []string{url.PathEscape(op)}, nil, req, &out)
}

// Record records an outside agent's experiment.
func (c *Client) Record(ctx context.Context, id string, req control.RecordRequest) (control.RecordResponse, error) {
	var out control.RecordResponse
	return out, c.onCampaign(ctx, http.MethodPost, id, []string{"record"}, nil, req, &out)
}

// Workers lists the live workers.
func (c *Client) Workers(ctx context.Context) ([]control.Worker, error) {
	var out []control.Worker
	return out, c.do(ctx, http.MethodGet, "/v1/workers", nil, nil, &out)
}

// Queues reports the queues.
func (c *Client) Queues(ctx context.Context) ([]control.Queue, error) {
	var out []control.Queue
	return out, c.do(ctx, http.MethodGet, "/v1/queues", nil, nil, &out)
}
