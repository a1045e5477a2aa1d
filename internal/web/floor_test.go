package web

import (
	"context"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// A campaign driven by the scheduler names its workload and shows the
// streamed-bytes floor (the
// bytes a step streams, at the HBM bandwidth, averaged over its workload's
// evaluated positions) under that name, and the seed's all-weights floor
// beside it under its own.
func TestCampaignPageShowsBothFloorsNamed(t *testing.T) {
	s := startSite(t, "toy", 400, 10*time.Millisecond)
	waitfor.Cond(t, 90*time.Second, "a few experiments", func() bool { return s.status(t).ExperimentsRun >= 3 })
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
	var weights string
	s.fleet.Read(s.id, func(c *campaign.Campaign) {
		if id := c.State().WeightsID; id != nil {
			weights = id.String()
		}
	})
	if weights == "" {
		t.Fatal("the campaign names no weights")
	}
	if want := `<span id="weights">` + html.EscapeString(weights) + `</span>`; !strings.Contains(page, want) {
		t.Errorf("the summary does not name the campaign's weights (%s)", weights)
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

// An experiment an agent recorded is marked as the agent's in the results
// table, and so is the best when it is one.
func TestCampaignPageMarksAgentRecords(t *testing.T) {
	s := startSite(t, "toy", 400, 10*time.Millisecond)
	svc := s.fleet.Campaigns()
	ctx := context.Background()
	if _, err := svc.Command(ctx, s.id, campaign.OpPause, control.CommandRequest{}); err != nil {
		t.Fatal(err)
	}
	st := s.status(t)
	floor, err := control.FloorOf(st.Model, st.GPU, st.Settings.Pos, st.Settings.Batch, st.Settings.Workload)
	if err != nil {
		t.Fatal(err)
	}
	page := get(t, s.srv.URL+"/ui/c/"+s.id).body
	if strings.Contains(page, `id="best-recorded"`) {
		t.Fatal("the best is marked as an agent's before any record")
	}
	// Faster than anything the campaign evaluated, and above the floor.
	lat := floor.StreamedUS * 1.0001
	if _, err := svc.Record(ctx, s.id, control.RecordRequest{Status: "kept", LatencyUS: &lat, Kind: "predicted", Description: "by hand"}); err != nil {
		t.Fatal(err)
	}
	page = get(t, s.srv.URL+"/ui/c/"+s.id).body
	if !strings.Contains(page, `id="best-recorded"`) {
		t.Error("the best an agent recorded is not marked as the agent's")
	}
	if !regexp.MustCompile(`<tr class="kept recorded"><td class="n">\d+</td><td class="n"><span class="agent"`).MatchString(page) {
		t.Error("the recorded experiment's row is not marked as the agent's")
	}
}
