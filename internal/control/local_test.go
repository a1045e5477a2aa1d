package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/runner"
)

func newLocal(t *testing.T) *Local {
	t.Helper()
	l, err := OpenLocal(filepath.Join(t.TempDir(), "ws"), true, flywheel.Env{AMKVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l.Now = func() time.Time { return clock }
	return l
}

func TestOpenLocalNeedsTheWorkspace(t *testing.T) {
	_, err := OpenLocal(filepath.Join(t.TempDir(), "absent"), false, flywheel.Env{})
	if err == nil || !strings.Contains(err.Error(), "no workspace at") {
		t.Fatalf("err %v", err)
	}
}

func TestLocalLifecycle(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t)
	if _, err := l.Resolve(ctx, Selector{}); err == nil || !strings.Contains(err.Error(), "no campaigns in") {
		t.Fatalf("empty workspace: %v", err)
	}
	resp, err := l.Create(ctx, api.CreateRequest{Model: "toy", GPU: "h200", Cold: true, Budget: &campaign.Budget{Iterations: 3}})
	if err != nil || !resp.Created || resp.ID != "toy-h200-cpu" {
		t.Fatalf("create: %+v %v", resp, err)
	}
	if again, err := l.Create(ctx, api.CreateRequest{Model: "toy", GPU: "h200"}); err != nil || again.Created {
		t.Fatalf("second create: %+v %v", again, err)
	}
	for _, sel := range []Selector{{}, {Arg: "toy-h200-cpu"}, {Arg: "toy", GPU: "h200", Device: "cpu"}, {ID: "toy-h200-cpu"}} {
		if id, err := l.Resolve(ctx, sel); err != nil || id != resp.ID {
			t.Errorf("%+v: %q %v", sel, id, err)
		}
	}
	for _, sel := range []Selector{{Arg: "toy"}, {Arg: "x", Extra: []string{"y"}}, {ID: "a", Arg: "b"}} {
		if id, err := l.Resolve(ctx, sel); err == nil {
			t.Errorf("%+v resolved to %q", sel, id)
		}
	}
	if _, err := l.Status(ctx, "no-such"); err == nil || !strings.Contains(err.Error(), `no campaign "no-such"`) {
		t.Fatalf("status of an unknown campaign: %v", err)
	}
	cmd, err := l.Command(ctx, resp.ID, campaign.OpPause, api.CommandRequest{Note: "lunch"})
	if err != nil || cmd.Campaign.Status != campaign.StatusPaused || len(cmd.Log) == 0 {
		t.Fatalf("pause: %+v %v", cmd, err)
	}
	if _, err := l.Command(ctx, resp.ID, campaign.OpPause, api.CommandRequest{}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("second pause: %v", err)
	}
	if _, err := l.Command(ctx, resp.ID, campaign.OpBudget, api.CommandRequest{}); !errors.Is(err, errNoBudget) {
		t.Fatalf("budget without a budget: %v", err)
	}
	// A campaign driven by another process refuses changes but not reads.
	ledger, err := l.Workspace.Open(resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Command(ctx, resp.ID, campaign.OpResume, api.CommandRequest{}); !errors.Is(err, runner.ErrLocked) || !strings.Contains(err.Error(), "another process drives it") {
		t.Fatalf("resume while locked: %v", err)
	}
	if _, err := l.Next(ctx, resp.ID); err != nil {
		t.Fatalf("next while locked: %v", err)
	}
	ledger.Close()
	if _, err := l.Command(ctx, resp.ID, campaign.OpResume, api.CommandRequest{}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	rec, err := l.Record(ctx, resp.ID, api.RecordRequest{Status: "tried", Correctness: "FAIL", Description: "by hand"})
	if err != nil || len(rec.Rows) != 1 || !strings.HasPrefix(rec.Rows[0].Description, "by hand") {
		t.Fatalf("record: %+v %v", rec, err)
	}
	files, err := l.WriteReport(ctx, resp.ID)
	if err != nil || len(files.Files) != 4 {
		t.Fatalf("report: %+v %v", files, err)
	}
	for _, f := range files.Files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("report file: %v", err)
		}
	}
	list, err := l.List(ctx)
	if err != nil || len(list) != 1 || list[0].ExperimentsRun != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// An unreadable ledger is named in List's error; the others are listed.
func TestLocalListSkipsAnUnreadableCampaign(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t)
	if _, err := l.Create(ctx, api.CreateRequest{Model: "toy", GPU: "h200"}); err != nil {
		t.Fatal(err)
	}
	bad := l.Workspace.CampaignDir("broken")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "ledger.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := l.List(ctx)
	if len(list) != 1 || err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("list: %+v %v", list, err)
	}
}
