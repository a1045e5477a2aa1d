package web

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/internal/apitest"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/trial"
)

// A campaign driven by the scheduler names its workload and shows the
// streamed-bytes floor (the
// bytes a step streams, at the HBM bandwidth, averaged over its workload's
// evaluated positions) under that name, and the seed's all-weights floor
// beside it under its own.
func TestCampaignPageShowsBothFloorsNamed(t *testing.T) {
	s := startSite(t, "toy", 400, 10*time.Millisecond)
	apitest.WaitFor(t, 90*time.Second, "a few experiments", func() bool { return s.status(t).ExperimentsRun >= 3 })
	cfg, err := model.Load("toy")
	if err != nil {
		t.Fatal(err)
	}
	target, err := ir.Target("h200")
	if err != nil {
		t.Fatal(err)
	}
	w := *campaign.DefaultSettings().Workload // the campaign's: its floor is the mean over the evaluated positions
	ctxCfg, err := trial.ContextConfig(cfg, "toy", w)
	if err != nil {
		t.Fatal(err)
	}
	steps, weightBytes, err := trial.StepFloors(ctxCfg, target, w)
	if err != nil {
		t.Fatal(err)
	}
	floor := 0.0
	for _, s := range steps {
		floor += s.Weight * s.StreamedUS
	}
	streamed := fmt.Sprintf("%.2f µs", ir.RoundTo(floor, 4))
	all := fmt.Sprintf("%.2f µs", ir.RoundTo(target.BandwidthBoundUS(weightBytes), 4))
	if streamed == all {
		t.Fatalf("the floors %s and %s print alike: the test cannot tell them apart", streamed, all)
	}
	page := get(t, s.srv.URL+"/ui/c/"+s.id).body
	if want := `<span id="workload">` + w.String() + `</span>`; !strings.Contains(page, want) {
		t.Errorf("the summary does not name the campaign's workload (%s)", w)
	}
	for _, want := range []struct{ id, label, value string }{
		{"floor", "streamed-bytes floor", streamed},
		{"all-weights-floor", "all-weights floor", all},
	} {
		re := regexp.MustCompile(`<span class="k">` + want.label + `</span><span id="` + want.id + `">([^<]*)</span>`)
		m := re.FindStringSubmatch(page)
		if m == nil {
			t.Errorf("the summary has no %q labelled %q", want.id, want.label)
			continue
		}
		if m[1] != want.value {
			t.Errorf("%s shows %q, want %q", want.label, m[1], want.value)
		}
	}
}
