package scheduler

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/runner"
)

// A campaign whose model no live worker of its target could hold is refused
// at start with a 4xx, before any trial is queued.
func TestStartRefusesAModelNoWorkerCanHold(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	workers := []control.Worker{
		{ID: "small-box", Target: "h100", Device: "cpu", MemoryBytes: 2 << 30},
		{ID: "big-box-other-target", Target: "h200", Device: "cpu", MemoryBytes: 512 << 30},
	}
	f := startFleet(t, ws, Options{Workers: func(context.Context) ([]control.Worker, error) { return workers, nil }})
	_, _, _, err := f.Create(context.Background(), control.CreateRequest{Model: "llama-8b", GPU: "h100", Device: "cpu"})
	if !errors.Is(err, control.ErrBadValue) || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("llama-8b on 2 GiB workers: %v, want ErrBadValue naming the memory", err)
	}
	if ids, _ := f.IDs(); len(ids) != 0 {
		t.Fatalf("a refused campaign was created: %v", ids)
	}
	if _, _, _, err := f.Create(context.Background(), control.CreateRequest{Model: "toy", GPU: "h100", Device: "cpu", Workers: 1}); err != nil {
		t.Fatalf("toy fits: %v", err)
	}
	h, _ := api.NewServer(api.Options{Service: f.Campaigns(), Token: "test-token-test-token"})
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/campaigns", strings.NewReader(`{"model": "llama-8b", "gpu": "h100"}`))
	req.Header.Set("Authorization", "Bearer test-token-test-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Fatalf("API start of llama-8b: status %d, want 4xx", resp.StatusCode)
	}
}
