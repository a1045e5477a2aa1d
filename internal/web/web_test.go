package web

import (
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/waitfor"
)

type answer struct {
	status int
	body   string
	header http.Header
}

func get(t *testing.T, url string) answer {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(data), resp.Header}
}

// post sends a form without following the redirect.
func post(t *testing.T, target string, form url.Values, header http.Header) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	maps.Copy(req.Header, header)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(data), resp.Header}
}

func TestPagesReadAndActionsNeedTheToken(t *testing.T) {
	s := startSite(t, "toy", 400, 10*time.Millisecond)
	waitfor.Cond(t, 90*time.Second, "a few experiments", func() bool { return s.status(t).ExperimentsRun >= 3 })

	if a := get(t, s.srv.URL+"/"); a.status != 200 || !strings.Contains(a.body, "Campaigns") {
		t.Fatalf("/ does not lead to the campaigns page: %d", a.status)
	}
	idx := get(t, s.srv.URL+"/ui/")
	for _, want := range []string{s.id, "optimizing", `data-src="/ui/live"`, "/ui/assets/live.js", "in process"} {
		if !strings.Contains(idx.body, want) {
			t.Errorf("the campaigns page lacks %q", want)
		}
	}
	if csp := idx.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if strings.Contains(idx.body, "http://") || strings.Contains(idx.body, "https://") {
		t.Error("the page refers to another site (the browser may have no network)")
	}
	page := get(t, s.srv.URL+"/ui/c/"+s.id)
	for _, want := range []string{`id="results"`, `id="chart"`, `name="token"`, `type="password"`, "streamed-bytes floor", "all-weights floor"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the campaign page lacks %q", want)
		}
	}
	chart := get(t, s.srv.URL+"/ui/c/"+s.id+"/chart.svg")
	if chart.status != 200 || !strings.HasPrefix(chart.header.Get("Content-Type"), "image/svg+xml") || !strings.Contains(chart.body, "<svg") {
		t.Errorf("chart: %d %s", chart.status, chart.header.Get("Content-Type"))
	}
	// Once enough trials are correct, the page ranks the knobs and shows a
	// slice plot of the first.
	waitfor.Cond(t, 90*time.Second, "enough experiments for the knob view", func() bool {
		return s.status(t).ExperimentsRun >= 2*campaign.MinImportanceTrials
	})
	page = get(t, s.srv.URL+"/ui/c/"+s.id)
	for _, want := range []string{`id="importance"`, "<meter", `id="knob-slice"`, "/ui/c/" + s.id + "/knobs.svg"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the campaign page's knob view lacks %q", want)
		}
	}
	knobs := get(t, s.srv.URL+"/ui/c/"+s.id+"/knobs.svg")
	if knobs.status != 200 || !strings.Contains(knobs.body, "<svg") || !strings.Contains(knobs.body, "latency predicted by the cost model") {
		t.Errorf("knobs.svg: %d %s", knobs.status, knobs.header.Get("Content-Type"))
	}
	if a := get(t, s.srv.URL+"/ui/c/nope"); a.status != 404 {
		t.Errorf("an unknown campaign answered %d", a.status)
	}
	for _, js := range []string{"/ui/assets/live.js", "/ui/assets/style.css"} {
		if a := get(t, s.srv.URL+js); a.status != 200 || a.body == "" {
			t.Errorf("%s: %d", js, a.status)
		}
	}

	pause := s.srv.URL + "/ui/c/" + s.id + "/pause"
	for name, tc := range map[string]struct {
		form   url.Values
		header http.Header
		target string
		want   int
	}{
		"no token":       {url.Values{}, nil, pause, 401},
		"wrong token":    {url.Values{"token": {"nope"}}, nil, pause, 401},
		"wrong header":   {url.Values{}, http.Header{"Authorization": {"Bearer nope"}}, pause, 401},
		"token in URL":   {url.Values{}, nil, pause + "?token=" + testToken, 400},
		"unknown action": {url.Values{"token": {testToken}}, nil, s.srv.URL + "/ui/c/" + s.id + "/delete", 404},
	} {
		if a := post(t, tc.target, tc.form, tc.header); a.status != tc.want {
			t.Errorf("%s: %d, want %d", name, a.status, tc.want)
		}
		if st := s.status(t).Status; st != campaign.StatusOptimizing {
			t.Fatalf("%s changed the campaign: %s", name, st)
		}
	}

	a := post(t, pause, url.Values{"token": {testToken}}, nil)
	if a.status != http.StatusSeeOther || strings.Contains(a.header.Get("Location"), testToken) {
		t.Fatalf("pause with the token: %d, Location %q", a.status, a.header.Get("Location"))
	}
	if st := s.status(t).Status; st != campaign.StatusPaused {
		t.Fatalf("after pause the campaign is %s", st)
	}
	if a := post(t, pause, url.Values{"token": {testToken}}, nil); a.status != 409 {
		t.Errorf("pausing a paused campaign: %d, want 409", a.status)
	}
	a = post(t, s.srv.URL+"/ui/c/"+s.id+"/resume", url.Values{}, http.Header{"Authorization": {"Bearer " + testToken}})
	if a.status != http.StatusSeeOther || s.status(t).Status != campaign.StatusOptimizing {
		t.Fatalf("resume with the header: %d, campaign %s", a.status, s.status(t).Status)
	}
	// The API is still there, beside the pages.
	if a := get(t, s.srv.URL+"/v1/campaigns/"+s.id); a.status != 200 || !strings.Contains(a.body, `"status"`) {
		t.Errorf("the API behind the pages: %d", a.status)
	}
}

func TestReadOnlyWithoutAToken(t *testing.T) {
	s := startSite(t, "toy", 3, 0)
	pages, err := Handler(Options{Campaigns: s.fleet.Campaigns()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptestServer(t, pages)
	if body := get(t, srv+"/ui/c/"+s.id).body; strings.Contains(body, `name="token"`) || !strings.Contains(body, "Read-only") {
		t.Error("a page without a token offers the actions")
	}
	if a := post(t, srv+"/ui/c/"+s.id+"/stop", url.Values{"token": {""}}, nil); a.status != 401 {
		t.Errorf("stop on read-only pages: %d", a.status)
	}
}
