package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A ledger written when the campaign state held its schedule points as raw
// JSON (a version 1 ledger.json, from before the journal) opens: the points
// are read into typed ones, and the state written back is the same bytes.
func TestLedgerWithRawPointStateOpens(t *testing.T) {
	state, err := os.ReadFile(filepath.Join("..", "campaign", "testdata", "state_before_typed_points.json"))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id := "toy-h200-cpu"
	data, err := json.Marshal(ledgerFile{Version: 1, State: state})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ws.CampaignDir(id), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.CampaignDir(id), "ledger.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := ws.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := l.Campaign()
	if best := c.State().Best; best == nil || best.Point == nil || best.Point.ID() != best.ScheduleID {
		t.Fatalf("best %+v: want a typed point with the recorded id", best)
	}
	again, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(state) {
		t.Error("the state written back differs from the one read")
	}
}
