package control

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
)

// Watch shows the status until the campaign is done, showing it done last.
func TestWatchFollowsACampaignUntilItIsDone(t *testing.T) {
	s := New(newLocal(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := s.Create(ctx, CreateRequest{Model: "toy", GPU: "h200", Cold: true})
	if err != nil {
		t.Fatal(err)
	}
	var shown []campaign.Status
	err = Watch(ctx, s, resp.ID, time.Millisecond, func(rep campaign.StatusReport, text string) error {
		shown = append(shown, rep.Status)
		if !strings.Contains(text, resp.ID) {
			t.Errorf("status text without the campaign's id:\n%s", text)
		}
		if len(shown) == 3 {
			_, err := s.Command(ctx, resp.ID, campaign.OpStop, CommandRequest{})
			return err
		}
		return nil
	})
	if err != nil || len(shown) != 4 || shown[2] == campaign.StatusDone || shown[3] != campaign.StatusDone {
		t.Fatalf("watch: %v, shown %v", err, shown)
	}
	if err := Watch(ctx, s, resp.ID, 0, nil); err == nil {
		t.Error("a zero interval was accepted")
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	if err := Watch(stopped, s, "no-such-campaign", time.Second, nil); err != nil {
		t.Errorf("a watch stopped before it began: %v", err)
	}
}
