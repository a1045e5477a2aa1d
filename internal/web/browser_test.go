package web

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/internal/proctest"
	"github.com/amk-dev/amk/waitfor"
)

var (
	screenshot      = flag.String("web.screenshot", "", "also write the browser test's screenshot of a campaign page to this path (docs/web-view.png)")
	knobsScreenshot = flag.String("web.knobs-screenshot", "", "also write the browser test's screenshot of a campaign's knob view to this path (docs/web-view-knobs.png)")
)

// browser starts Debian's chromium, headless, with a fresh profile and
// nothing that reaches the network by itself. Chromium runs in a process
// group of its own; the cleanup closes it, then kills and waits for the
// whole group (the network service outlives the browser, still writing
// into the profile) before the profile directory, whose removal was
// registered first and so runs last, is removed.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed and could not be (make deps, scripts/ensure-deps.sh, installs Debian's chromium): the web view's browser test is skipped")
	}
	profile := t.TempDir()
	var started *exec.Cmd
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1400),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			proctest.Isolate(cmd)
			started = cmd
		}),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()   // closes the browser and waits for the started process
		cancelAlloc() // waits for the allocator's goroutines
		if started != nil {
			if err := proctest.KillGroup(started, 30*time.Second); err != nil {
				t.Errorf("chromium's processes outlived the test: %v", err)
			}
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// text is the text of the first node matching sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	if err := chromedp.Run(ctx, chromedp.Text(sel, &s, chromedp.ByQuery)); err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// eventually polls a JavaScript condition in the page (which the page's own
// polling must make true: the test never reloads it).
func eventually(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Poll(js, nil, chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		t.Fatalf("the page never showed %s: %v", what, err)
	}
}

// waitForURL waits until a navigation reaches a URL containing part.
func waitForURL(t *testing.T, ctx context.Context, part string) {
	t.Helper()
	waitfor.Cond(t, 90*time.Second, "a page at ..."+part, func() bool {
		var loc string
		return chromedp.Run(ctx, chromedp.Location(&loc)) == nil && strings.Contains(loc, part)
	})
}

func TestBrowserShowsALiveCampaign(t *testing.T) {
	ctx := browser(t)
	s := startSite(t, "small", 400, 150*time.Millisecond)
	waitfor.Cond(t, 90*time.Second, "the first experiments", func() bool { return s.status(t).ExperimentsRun >= 2 })

	// The campaigns page: the campaign, live.
	if err := chromedp.Run(ctx, chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible("#campaigns", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`#campaigns tr[data-id=%q]`, s.id)
	if got := text(t, ctx, row+" .status"); got != string(campaign.StatusOptimizing) {
		t.Errorf("status %q, want optimizing", got)
	}
	first, err := strconv.Atoi(text(t, ctx, row+" td:nth-child(3)"))
	if err != nil {
		t.Fatalf("experiments cell: %v", err)
	}
	eventually(t, ctx, "more experiments without a reload",
		fmt.Sprintf(`Number(document.querySelector('%s td:nth-child(3)').textContent) > %d`, row, first))
	if got := text(t, ctx, "#workers + p, h2 + p.note"); !strings.Contains(got, "in process") {
		t.Errorf("workers note %q", got)
	}

	// The campaign page: summary, chart, results, growing.
	if err := chromedp.Run(ctx, chromedp.Click(row+" a", chromedp.ByQuery), chromedp.WaitVisible("#results", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the chart drawn", `document.querySelector('#chart').complete && document.querySelector('#chart').naturalWidth > 100`)
	eventually(t, ctx, "a best latency and its % of the floor", `/µs/.test(document.querySelector('#best').textContent) && /%/.test(document.querySelector('#pct').textContent)`)
	rows := func() int {
		var n int
		if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll('#results tbody tr').length`, &n)); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := rows()
	eventually(t, ctx, "new results rows", fmt.Sprintf(`document.querySelectorAll('#results tbody tr').length > %d`, before))
	if sum := text(t, ctx, "#summary"); !strings.Contains(sum, "streamed-bytes floor") || !strings.Contains(sum, "all-weights floor") {
		t.Errorf("the summary does not name both floors: %q", sum)
	}
	eventually(t, ctx, "twenty results", `document.querySelectorAll('#results tbody tr').length >= 20`)
	// The live refresh replaces the chart; shoot once the new one is drawn.
	eventually(t, ctx, "the chart drawn again", `document.querySelector('#chart').complete && document.querySelector('#chart').naturalWidth > 100`)
	var shot []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&shot, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(shot)); err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if *screenshot != "" {
		if err := os.WriteFile(*screenshot, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A wrong token changes nothing; the right one pauses, and the token
	// never shows in the URL.
	if err := chromedp.Run(ctx,
		chromedp.SendKeys("#token", "not-the-token", chromedp.ByQuery),
		chromedp.Click("#pause", chromedp.ByQuery),
		chromedp.WaitVisible("#message", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, "#message"); !strings.Contains(got, "token") || !strings.Contains(got, "Nothing was changed") {
		t.Errorf("wrong-token page says %q", got)
	}
	if st := s.status(t).Status; st != campaign.StatusOptimizing {
		t.Fatalf("a wrong token changed the campaign to %s", st)
	}
	var location string
	// With twenty trials and more, the page ranks the knobs and plots every
	// trial against the most important one (drawn when the page loads).
	if err := chromedp.Run(ctx, chromedp.Navigate(s.srv.URL+"/ui/c/"+s.id), chromedp.WaitVisible("#knobs", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the knob slice plot drawn", `document.querySelector('#knob-slice').complete && document.querySelector('#knob-slice').naturalWidth > 100`)
	eventually(t, ctx, "knobs ranked with their importance", `document.querySelectorAll('#importance tbody tr meter').length >= 2`)
	var knobShot []byte
	if err := chromedp.Run(ctx, chromedp.Screenshot("#knobs", &knobShot, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if img, err := png.Decode(bytes.NewReader(knobShot)); err != nil || img.Bounds().Dy() < 300 {
		t.Fatalf("the knob view's screenshot is not a PNG of the section: %v", err)
	}
	if *knobsScreenshot != "" {
		if err := os.WriteFile(*knobsScreenshot, knobShot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Run(ctx,
		chromedp.Navigate(s.srv.URL+"/ui/c/"+s.id),
		chromedp.SendKeys("#token", testToken, chromedp.ByQuery),
		chromedp.Click("#pause", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitForURL(t, ctx, "done=pause")
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#flash", chromedp.ByQuery), chromedp.Location(&location)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(location, testToken) {
		t.Errorf("the token is in the URL: %s", location)
	}
	if got := text(t, ctx, "#status"); got != string(campaign.StatusPaused) {
		t.Errorf("the page shows %q after pause", got)
	}
	if st := s.status(t).Status; st != campaign.StatusPaused {
		t.Errorf("the campaign is %s after pause", st)
	}
	// Stop from the page, then the campaigns page shows it done.
	if err := chromedp.Run(ctx,
		chromedp.SendKeys("#token", testToken, chromedp.ByQuery),
		chromedp.Click("#stop", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitForURL(t, ctx, "done=stop")
	if err := chromedp.Run(ctx, chromedp.WaitVisible("#flash", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(ctx, chromedp.Navigate(s.srv.URL+"/ui/"), chromedp.WaitVisible("#campaigns", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, row+" .status"); got != string(campaign.StatusDone) {
		t.Errorf("after stop the campaigns page shows %q", got)
	}
}
