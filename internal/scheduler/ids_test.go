package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
)

// Campaign ids keep the model's case ("toy-2L-h100-cpu") and a chosen
// name's ("Night1"); every verb of the API must reach every preset's
// campaign, and the list must show it.
func TestEveryPresetsCampaignIsReachableThroughTheAPI(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	// Trials wait until the test ends: no weights are generated for the
	// big presets.
	idle := dispatch.NewLocal(1, func(ctx context.Context, spec trial.Spec) trial.Outcome {
		<-ctx.Done()
		return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "cancelled"}}
	})
	f := startFleet(t, ws, Options{Transport: idle})
	const token = "test-token-test-token"
	h, err := api.NewServer(api.Options{Service: f.Campaigns(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var ids []string
	for _, preset := range model.PresetNames() {
		for _, name := range []string{"", "Night1"} {
			body := fmt.Sprintf(`{"model": %q, "gpu": "h100", "device": "cpu", "name": %q, "workers": 1, "cold": true}`, preset, name)
			code, out := call("POST", "/v1/campaigns", body)
			if code != http.StatusCreated && code != http.StatusOK {
				t.Fatalf("create %s/%q: %d %s", preset, name, code, out)
			}
			var created control.CreateResponse
			if err := json.Unmarshal([]byte(out), &created); err != nil {
				t.Fatal(err)
			}
			if want := campaign.ID(preset, "h100", "cpu", name); created.ID != want {
				t.Fatalf("created id %q, want %q", created.ID, want)
			}
			ids = append(ids, created.ID)
		}
	}
	if !slices.Contains(ids, "toy-2L-h100-cpu") || !slices.Contains(ids, "toy-2L-h100-cpu-Night1") {
		t.Fatalf("ids %v lack the mixed-case ones", ids)
	}
	for _, id := range ids {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/v1/campaigns/" + id, ""},
			{"GET", "/v1/campaigns/" + id + "/next", ""},
			{"GET", "/v1/campaigns/" + id + "/report", ""},
			{"POST", "/v1/campaigns/" + id + "/record", `{"status": "failed", "description": "probe"}`},
			{"POST", "/v1/campaigns/" + id + "/pause", ""},
		} {
			if code, out := call(c.method, c.path, c.body); code != http.StatusOK && code != http.StatusCreated {
				t.Errorf("%s %s: %d %s", c.method, c.path, code, out)
			}
		}
	}
	code, out := call("GET", "/v1/campaigns", "")
	var list []campaign.StatusReport
	if code != http.StatusOK || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("list: %d %s", code, out)
	}
	var listed []string
	for _, r := range list {
		listed = append(listed, r.ID)
	}
	for _, id := range ids {
		if !slices.Contains(listed, id) {
			t.Errorf("list lacks %s (has %v)", id, listed)
		}
	}
	for _, bad := range []string{"..", ".hidden", "-x"} {
		if code, _ := call("GET", "/v1/campaigns/"+bad, ""); code != http.StatusNotFound {
			t.Errorf("GET %q: %d, want 404", bad, code)
		}
	}
}
