package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/apitest"
	"github.com/amk-dev/amk/internal/scheduler"
)

const token = "s3cret-token"

// newServer serves the real handlers over a fleet with an in-process
// transport.
func newServer(t *testing.T) (*httptest.Server, *scheduler.Fleet) {
	t.Helper()
	return newServerWith(t, "")
}

// newServerWith starts a server whose files must lie under modelsDir.
func newServerWith(t *testing.T, modelsDir string) (*httptest.Server, *scheduler.Fleet) {
	t.Helper()
	s := apitest.Start(t, apitest.Options{API: api.Options{Token: token, MaxBody: 4096, CommandTimeout: 5 * time.Second, ModelsDir: modelsDir}})
	return s.Server, s.Fleet
}

type reply struct {
	status int
	body   string
	err    api.Error
}

func call(t *testing.T, srv *httptest.Server, method, path, tok, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, body: string(data)}
	if resp.StatusCode >= 300 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: error with content type %q", method, path, ct)
		}
		if err := json.Unmarshal(data, &r.err); err != nil || r.err.Message == "" || r.err.Code == "" {
			t.Errorf("%s %s: error body %q is not {error, code}", method, path, data)
		}
	}
	return r
}

const toyBody = `{"model": "toy", "gpu": "h200", "cold": true, "budget": {"iterations": 6}, "workers": 2}`

func TestBadRequestsAreClearJSONErrors(t *testing.T) {
	srv, _ := newServer(t)
	cases := []struct {
		name, method, path, tok, body string
		status                        int
		code                          string
	}{
		{"no token", "POST", "/v1/campaigns", "", toyBody, 401, api.CodeUnauthorized},
		{"wrong token", "POST", "/v1/campaigns", "s3cret-tokem", toyBody, 401, api.CodeUnauthorized},
		{"token prefix", "POST", "/v1/campaigns", "s3cret", toyBody, 401, api.CodeUnauthorized},
		{"malformed JSON", "POST", "/v1/campaigns", token, `{"model": "toy",`, 400, api.CodeMalformedJSON},
		{"not an object", "POST", "/v1/campaigns", token, `[1, 2]`, 400, api.CodeMalformedJSON},
		{"two objects", "POST", "/v1/campaigns", token, toyBody + toyBody, 400, api.CodeMalformedJSON},
		{"empty body", "POST", "/v1/campaigns", token, "", 400, api.CodeMalformedJSON},
		{"unknown field", "POST", "/v1/campaigns", token, `{"model": "toy", "gpu": "h200", "iters": 5}`, 400, api.CodeUnknownField},
		{"wrong type", "POST", "/v1/campaigns", token, `{"model": "toy", "gpu": "h200", "workers": "two"}`, 400, api.CodeBadValue},
		{"missing gpu", "POST", "/v1/campaigns", token, `{"model": "toy"}`, 400, api.CodeBadValue},
		{"bad device", "POST", "/v1/campaigns", token, `{"model": "toy", "gpu": "h200", "device": "tpu"}`, 400, api.CodeBadValue},
		{"zero batch", "POST", "/v1/campaigns", token, `{"model": "toy", "gpu": "h200", "batch": 0}`, 400, api.CodeBadValue},
		{"bad workload", "POST", "/v1/campaigns", token, `{"model": "toy", "gpu": "h200", "workload": {"prompt_lens": [8], "gen_len": 0}}`, 400, api.CodeBadValue},
		{"unknown model", "POST", "/v1/campaigns", token, `{"model": "gpt-9", "gpu": "h200"}`, 400, api.CodeBadValue},
		{"unknown gpu", "POST", "/v1/campaigns", token, `{"model": "toy", "gpu": "v100"}`, 400, api.CodeBadValue},
		{"negative budget", "POST", "/v1/campaigns", token, `{"model": "toy", "gpu": "h200", "budget": {"iterations": -1}}`, 400, api.CodeBadValue},
		{"bad criteria", "POST", "/v1/campaigns", token, `{"model": "toy", "gpu": "h200", "move_on": {"max_minutes": -5}}`, 400, api.CodeBadValue},
		{"oversized body", "POST", "/v1/campaigns", token, `{"model": "` + strings.Repeat("x", 5000) + `"}`, 413, api.CodeTooLarge},
		{"unknown campaign", "GET", "/v1/campaigns/nope", "", "", 404, api.CodeNotFound},
		{"unknown campaign next", "GET", "/v1/campaigns/nope/next", "", "", 404, api.CodeNotFound},
		{"escaped path", "GET", "/v1/campaigns/..%2F..%2Fcampaigns", "", "", 404, api.CodeNotFound},
		{"escaped path command", "POST", "/v1/campaigns/..%2Fx/stop", token, "", 404, api.CodeNotFound},
		{"unknown campaign pause", "POST", "/v1/campaigns/nope/pause", token, "", 404, api.CodeNotFound},
		{"unknown campaign record", "POST", "/v1/campaigns/nope/record", token, `{"status": "kept"}`, 404, api.CodeNotFound},
		{"pause without token", "POST", "/v1/campaigns/nope/pause", "", "", 401, api.CodeUnauthorized},
		{"unknown endpoint", "GET", "/v2/anything", "", "", 404, api.CodeNotFound},
		{"wrong method", "DELETE", "/v1/campaigns", token, "", 405, api.CodeMethodNotAllowed},
		{"bad format", "GET", "/v1/campaigns/nope?format=xml", "", "", 400, api.CodeBadValue},
		{"workers of a local transport", "GET", "/v1/workers", "", "", 501, api.CodeUnsupported},
	}
	for _, c := range cases {
		r := call(t, srv, c.method, c.path, c.tok, c.body)
		if r.status != c.status || r.err.Code != c.code {
			t.Errorf("%s: %d %q, want %d %s (body %s)", c.name, r.status, r.err.Code, c.status, c.code, r.body)
		}
	}
	// Nothing was created by any of them.
	if r := call(t, srv, "GET", "/v1/campaigns", "", ""); r.status != 200 || strings.TrimSpace(r.body) != "[]" {
		t.Fatalf("campaigns after bad requests: %d %s", r.status, r.body)
	}
}

func TestCampaignLifecycleOverHTTP(t *testing.T) {
	srv, _ := newServer(t)
	r := call(t, srv, "POST", "/v1/campaigns", token, toyBody)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var created control.CreateResponse
	if err := json.Unmarshal([]byte(r.body), &created); err != nil || created.ID != "toy-h200-cpu" || !created.Created || created.Workers != 2 {
		t.Fatalf("create response %+v %v", created, err)
	}
	// Creating it again is a resume, not a conflict.
	if r := call(t, srv, "POST", "/v1/campaigns", token, toyBody); r.status != http.StatusOK || !strings.Contains(r.body, `"created": false`) {
		t.Fatalf("second create: %d %s", r.status, r.body)
	}
	id := created.ID
	var st campaign.StatusReport
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := call(t, srv, "GET", "/v1/campaigns/"+id, "", "")
		if err := json.Unmarshal([]byte(r.body), &st); err != nil {
			t.Fatalf("status: %v %s", err, r.body)
		}
		if st.Status == campaign.StatusDone && len(st.InFlight) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("campaign did not finish: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.ExperimentsRun != 6 {
		t.Fatalf("%d experiments, want the budget's 6", st.ExperimentsRun)
	}
	text := call(t, srv, "GET", "/v1/campaigns/"+id+"?format=text", "", "")
	if !strings.Contains(text.body, "AMK Autoresearch Orchestration Status") || !strings.Contains(text.body, "status       : DONE") {
		t.Fatalf("status text:\n%s", text.body)
	}
	if n := call(t, srv, "GET", "/v1/campaigns/"+id+"/next?format=text", "", ""); !strings.HasPrefix(n.body, "DECISION: STOP") {
		t.Fatalf("next: %s", n.body)
	}
	if md := call(t, srv, "GET", "/v1/campaigns/"+id+"/report?format=md", "", ""); !strings.Contains(md.body, "wake-up report") {
		t.Fatalf("report md: %s", md.body)
	}
	if agg := call(t, srv, "GET", "/v1/campaigns/"+id+"/report?format=aggregate", "", ""); !strings.Contains(agg.body, "Campaign Report") {
		t.Fatalf("aggregate report: %s", agg.body)
	}
	if w := call(t, srv, "POST", "/v1/campaigns/"+id+"/report", token, ""); w.status != 200 || !strings.Contains(w.body, "report.svg") {
		t.Fatalf("write report: %d %s", w.status, w.body)
	}
	// Conflicts with the campaign's state.
	if c := call(t, srv, "POST", "/v1/campaigns/"+id+"/pause", token, ""); c.status != 409 {
		t.Fatalf("pause of a done campaign: %d %s", c.status, c.body)
	}
	if c := call(t, srv, "POST", "/v1/campaigns/"+id+"/record", token, `{"status": "kept", "latency_us": 1, "kind": "predicted"}`); c.status != 409 {
		t.Fatalf("record into a done campaign: %d %s", c.status, c.body)
	}
	if c := call(t, srv, "POST", "/v1/campaigns/"+id+"/pause", token, `{"budget": {"iterations": 3}}`); c.status != 400 {
		t.Fatalf("pause with a budget: %d %s", c.status, c.body)
	}
	// Reopen with a bigger budget; the campaign runs on and stops again.
	if c := call(t, srv, "POST", "/v1/campaigns/"+id+"/reopen", token, `{"note": "more", "budget": {"iterations": 9}}`); c.status != 200 || !strings.Contains(c.body, "reopened: more") {
		t.Fatalf("reopen: %d %s", c.status, c.body)
	}
	if c := call(t, srv, "PUT", "/v1/campaigns/"+id+"/budget", token, `{"iterations": 8}`); c.status != 200 {
		t.Fatalf("budget: %d %s", c.status, c.body)
	}
	if c := call(t, srv, "PUT", "/v1/campaigns/"+id+"/budget", token, `{"iterations": -8}`); c.status != 400 {
		t.Fatalf("negative budget: %d %s", c.status, c.body)
	}
	if c := call(t, srv, "PUT", "/v1/campaigns/"+id+"/criteria", token, `{"consecutive_reverts": 0}`); c.status != 200 || !strings.Contains(c.body, `"consecutive_reverts": 0`) {
		t.Fatalf("criteria: %d %s", c.status, c.body)
	}
	if r := call(t, srv, "GET", "/healthz", "", ""); r.status != 200 || !strings.Contains(r.body, `"campaigns": 1`) {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	if r := call(t, srv, "GET", "/metrics", "", ""); r.status != 404 {
		t.Fatalf("metrics without a handler: %d", r.status)
	}
}

func TestRecordOverHTTP(t *testing.T) {
	srv, _ := newServer(t)
	body := `{"model": "toy", "gpu": "h200", "cold": true, "overnight": true, "workers": 1}`
	if r := call(t, srv, "POST", "/v1/campaigns", token, body); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := "toy-h200-cpu"
	if r := call(t, srv, "POST", "/v1/campaigns/"+id+"/pause", token, `{"note": "agent at work"}`); r.status != 200 {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if r := call(t, srv, "POST", "/v1/campaigns/"+id+"/record", token, `{"status": "sideways"}`); r.status != 400 || r.err.Code != api.CodeBadValue {
		t.Fatalf("record with a bad status: %d %s", r.status, r.body)
	}
	if r := call(t, srv, "POST", "/v1/campaigns/"+id+"/record", token, `{"status": "kept"}`); r.status != 400 {
		t.Fatalf("kept without a latency: %d %s", r.status, r.body)
	}
	r := call(t, srv, "POST", "/v1/campaigns/"+id+"/record", token,
		`{"status": "kept", "latency_us": 12.5, "kind": "predicted", "description": "hand-tuned\tby an agent", "config": {"threads_per_block": 128}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("record: %d %s", r.status, r.body)
	}
	var rec control.RecordResponse
	if err := json.Unmarshal([]byte(r.body), &rec); err != nil || len(rec.Rows) != 1 || rec.Rows[0].Tag != "kept" {
		t.Fatalf("record response %+v %v", rec, err)
	}
	if rec.Campaign.BestUS == nil || *rec.Campaign.BestUS != 12.5 {
		t.Fatalf("best after the record: %v", rec.Campaign.BestUS)
	}
}

func TestClient(t *testing.T) {
	srv, _ := newServer(t)
	ctx := context.Background()
	anon, err := api.NewClient(strings.TrimPrefix(srv.URL, "http://"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = anon.Create(ctx, control.CreateRequest{Model: "toy", GPU: "h200"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Code != api.CodeUnauthorized {
		t.Fatalf("create without a token: %v", err)
	}
	c, err := api.NewClient(srv.URL+"/", token, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A budget and an overnight campaign that cannot end before the stop
	// below arrives (a 3-trial toy campaign sometimes finished first).
	resp, err := c.Create(ctx, control.CreateRequest{Model: "toy", GPU: "h200", Cold: true, Overnight: true, Budget: &campaign.Budget{Iterations: 100000}})
	if err != nil || !resp.Created {
		t.Fatalf("create: %+v %v", resp, err)
	}
	if _, err := c.Status(ctx, "missing"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("status of a missing campaign: %v", err)
	}
	if _, err := c.Command(ctx, resp.ID, campaign.OpStop, control.CommandRequest{Note: "enough"}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, resp.ID)
	if err != nil || st.Status != campaign.StatusDone || !strings.Contains(st.MoveOnReason, "enough") {
		t.Fatalf("status after stop: %+v %v", st, err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != resp.ID {
		t.Fatalf("campaigns: %+v %v", list, err)
	}
	if h, err := c.Healthz(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health %+v %v", h, err)
	}
	for _, bad := range []string{"", "ftp://host", "http://"} {
		if _, err := api.NewClient(bad, "", nil); err == nil {
			t.Errorf("NewClient(%q) accepted", bad)
		}
	}
}

func TestClientConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := api.NewClient(addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.List(context.Background())
	var ce *api.ConnError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err %v, want a connection-refused ConnError", err)
	}
}

// TestNewServerNeedsALongEnoughToken: the API refuses the tokens the
// scheduler's settings refuse (control.CheckAPIToken), also when it is
// built directly.
func TestNewServerNeedsALongEnoughToken(t *testing.T) {
	srv, f := newServer(t)
	_ = srv
	for _, tok := range []string{"  ", "t", "abc", " 1234567 "} {
		if _, err := api.NewServer(api.Options{Service: f.Campaigns(), Token: tok}); err == nil || !strings.Contains(err.Error(), "at least 8") {
			t.Errorf("token %q: %v, want refused as too short", tok, err)
		}
	}
	if _, err := api.NewServer(api.Options{Service: f.Campaigns(), Token: "12345678"}); err != nil {
		t.Fatalf("an 8-character token: %v", err)
	}
}

// TestBodiesMustBeOneUnambiguousJSONObject: a repeated key (also one that
// differs only in case, which encoding/json would merge) and a body declared
// as anything but JSON are refused before anything happens.
func TestBodiesMustBeOneUnambiguousJSONObject(t *testing.T) {
	srv, _ := newServer(t)
	post := func(contentType, body string) reply {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/v1/campaigns", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		r := reply{status: resp.StatusCode, body: string(data)}
		_ = json.Unmarshal(data, &r.err)
		return r
	}
	for _, c := range []struct {
		name, contentType, body string
		status                  int
		code, msg               string
	}{
		{"repeated key", "application/json", `{"model": "toy", "gpu": "h200", "gpu": "h100"}`, 400, api.CodeMalformedJSON, `duplicate key "gpu"`},
		{"repeated nested key", "application/json", `{"model": "toy", "gpu": "h200", "budget": {"iterations": 1, "iterations": 9}}`, 400, api.CodeMalformedJSON, `duplicate key "iterations" in budget`},
		{"case-folded repeat", "application/json", `{"model": "toy", "gpu": "h200", "GPU": "h100"}`, 400, api.CodeMalformedJSON, `duplicate key "GPU"`},
		{"text/plain", "text/plain", toyBody, 415, api.CodeMediaType, "not application/json"},
		{"form", "application/x-www-form-urlencoded", toyBody, 415, api.CodeMediaType, "not application/json"},
		{"garbage type", "%%%", toyBody, 415, api.CodeMediaType, "not application/json"},
	} {
		r := post(c.contentType, c.body)
		if r.status != c.status || r.err.Code != c.code || !strings.Contains(r.err.Message, c.msg) {
			t.Errorf("%s: %d %q %q, want %d %s with %q", c.name, r.status, r.err.Code, r.err.Message, c.status, c.code, c.msg)
		}
	}
	if r := call(t, srv, "GET", "/v1/campaigns", "", ""); r.status != 200 || strings.TrimSpace(r.body) != "[]" {
		t.Fatalf("a refused body created a campaign: %d %s", r.status, r.body)
	}
	for _, ct := range []string{"application/json; charset=utf-8", "application/merge-patch+json", ""} {
		if r := post(ct, toyBody); r.status != 201 && r.status != 200 {
			t.Errorf("Content-Type %q refused: %d %s", ct, r.status, r.body)
		}
	}
}

// TestModelFilesAreConfinedToTheModelsDirectory: "model" and "weights" name
// presets or files under the configured directory; any other path is
// refused with the same answer whether it exists or not.
func TestModelFilesAreConfinedToTheModelsDirectory(t *testing.T) {
	// (lower case: the campaign id derives from the path, and fleet ids
	// were lower-case only until issue 18 item 2)
	models, err := os.MkdirTemp("", "models")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(models) })
	cfg := `{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
		"num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 256}`
	if err := os.WriteFile(filepath.Join(models, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, _ := newServerWith(t, models)
	var answers []string
	for _, body := range []string{
		`{"model": "/etc/shadow", "gpu": "h200"}`,
		`{"model": "/etc/no-such-file", "gpu": "h200"}`,
		`{"model": "../../../../etc/shadow", "gpu": "h200"}`,
		`{"model": "toy", "gpu": "h200", "weights": "/etc/shadow"}`,
	} {
		r := call(t, srv, "POST", "/v1/campaigns", token, body)
		if r.status != 400 || r.err.Code != api.CodeBadValue || !strings.Contains(r.err.Message, "model not allowed") {
			t.Errorf("%s: %d %s %q, want 400 bad_value refusing the path", body, r.status, r.err.Code, r.err.Message)
		}
		answers = append(answers, r.err.Message)
	}
	if strings.Replace(answers[0], "/etc/shadow", "X", 1) != strings.Replace(answers[1], "/etc/no-such-file", "X", 1) {
		t.Errorf("the answer reveals whether a file exists: %q vs %q", answers[0], answers[1])
	}
	if r := call(t, srv, "POST", "/v1/campaigns", token, `{"model": "config.json", "gpu": "h200", "budget": {"iterations": 1}}`); r.status != 201 {
		t.Errorf("a config.json inside the models directory: %d %s", r.status, r.body)
	}
	// Without a models directory only presets are accepted.
	plain, _ := newServer(t)
	if r := call(t, plain, "POST", "/v1/campaigns", token, `{"model": "config.json", "gpu": "h200"}`); r.status != 400 ||
		!strings.Contains(r.err.Message, "no models directory") {
		t.Errorf("a file with no models directory: %d %s", r.status, r.body)
	}
}
