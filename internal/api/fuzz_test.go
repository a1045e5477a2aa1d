package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
)

// stubBackend accepts everything the handlers pass it, so the fuzzer
// exercises the request handling itself (and control's checks).
type stubBackend struct{ c *campaign.Campaign }

func newStub(t testing.TB) control.Service {
	c := campaign.New()
	_, err := c.Step(campaign.Start{Time: time.Unix(1_700_000_000, 0), Model: "toy", GPU: "h200", Device: "cpu", Cold: true,
		Settings: campaign.DefaultSettings(), Shape: flywheel.Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}})
	if err != nil {
		t.Fatal(err)
	}
	return control.New(&stubBackend{c: c})
}

func (s *stubBackend) Where() string                                   { return "in the stub" }
func (s *stubBackend) Dir(string) string                               { return "" }
func (s *stubBackend) Settle(context.Context, string, time.Time) error { return nil }
func (s *stubBackend) IDs() ([]string, error)                          { return []string{s.c.ID()}, nil }
func (s *stubBackend) Read(id string, fn func(*campaign.Campaign)) error {
	if id != s.c.ID() {
		return control.ErrNotFound
	}
	fn(s.c)
	return nil
}
func (s *stubBackend) Create(ctx context.Context, req control.CreateRequest) (string, bool, int, error) {
	return s.c.ID(), false, 1, nil
}
func (s *stubBackend) Do(ctx context.Context, id string, ev campaign.Event) (campaign.Decision, error) {
	if id != s.c.ID() {
		return campaign.Decision{}, control.ErrNotFound
	}
	// A fresh copy each time keeps every input independent.
	data, err := s.c.Marshal()
	if err != nil {
		return campaign.Decision{}, err
	}
	c, err := campaign.Load(data)
	if err != nil {
		return campaign.Decision{}, err
	}
	return c.Step(ev)
}

// FuzzRequestBodies: whatever the body, a state-changing endpoint answers a
// 2xx or a 4xx with a JSON body, never a 5xx or a panic.
func FuzzRequestBodies(f *testing.F) {
	paths := []string{"/v1/campaigns", "/v1/campaigns/toy-h200-cpu/record", "/v1/campaigns/toy-h200-cpu/reopen",
		"/v1/campaigns/toy-h200-cpu/budget", "/v1/campaigns/toy-h200-cpu/criteria", "/v1/campaigns/toy-h200-cpu/pause"}
	for i, body := range []string{
		`{"model": "toy", "gpu": "h200", "budget": {"iterations": 3}}`,
		`{"status": "kept", "latency_us": 3, "kind": "predicted", "config": {"threads_per_block": 128}}`,
		`{"budget": {"iterations": 9}, "move_on": {"max_minutes": 5}}`,
		`{"iterations": 5, "minutes": 1.5}`,
		`{"consecutive_reverts": 2, "speedup_target": 1e308}`,
		`{"note": "x"}`, `{`, `[]`, `null`, `{"status": "kept", "regions": {"mlp": 2}}`, "",
	} {
		f.Add(uint8(i), body)
	}
	h, err := NewServer(Options{Service: newStub(f), Token: "fuzz-token", MaxBody: 2048})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path := paths[int(which)%len(paths)]
		method := http.MethodPost
		if strings.HasSuffix(path, "/budget") || strings.HasSuffix(path, "/criteria") {
			method = http.MethodPut
		}
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer fuzz-token")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s %q: non-JSON answer %q", method, path, body, rec.Body)
		}
		if rec.Code >= 400 {
			var e Error
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Message == "" || e.Code == "" {
				t.Fatalf("error body %q", rec.Body)
			}
		}
	})
}
