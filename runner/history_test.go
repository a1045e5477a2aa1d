package runner

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// ledger.json holds the state less its growing lists: its size does not
// grow with the campaign's experiments, the history does, and a reopened
// campaign is the uncrashed run across several snapshots (the tried set
// included: the stream's infrastructure-free outcomes and its agent's
// records add to it).
func TestSnapshotsStayFlatAndTheHistoryHoldsTheRest(t *testing.T) {
	ws, l := newSyntheticLedger(t)
	id := l.ID()
	var sizes []int64
	for round := range 4 {
		applyEvents(t, l, round*SnapshotEvery, (round+1)*SnapshotEvery)
		info, err := os.Stat(l.path("ledger.json"))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, info.Size())
	}
	if last, first := sizes[len(sizes)-1], sizes[0]; last > first+first/4 {
		t.Errorf("ledger.json grew with the campaign: %v bytes after each snapshot", sizes)
	}
	data, err := os.ReadFile(l.path("ledger.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lf ledgerFile
	if err := json.Unmarshal(data, &lf); err != nil || lf.History == nil || lf.Version != ledgerVersion {
		t.Fatalf("ledger.json: %v, history %+v", err, lf.History)
	}
	if strings.Contains(string(lf.State), `"trajectory":[{`) {
		t.Error("ledger.json still holds the trajectory")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want := runUncrashed(t, 4*SnapshotEvery)
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, ws, id, c, want)
}

// A history record appended by a snapshot that never wrote ledger.json (a
// crash between the two) is not read, and the next snapshot writes over
// it; a record that ledger.json names and that does not check is refused.
func TestHistoryTailAndCorruption(t *testing.T) {
	ws, l := newSyntheticLedger(t)
	id := l.ID()
	applyEvents(t, l, 0, SnapshotEvery+10)
	path := l.path(historyName)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("0badf00d {\"seq\": 99, \"trajectory\": [{}]}\n12"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l, err = ws.Open(id)
	if err != nil {
		t.Fatalf("an unnamed tail refused the open: %v", err)
	}
	applyEvents(t, l, SnapshotEvery+10, 2*SnapshotEvery+20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want := runUncrashed(t, 2*SnapshotEvery+20, SnapshotEvery+10)
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, ws, id, c, want)

	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)/2] ^= 1
	if err := os.WriteFile(path, corrupt, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.View(id); err == nil || !strings.Contains(err.Error(), historyName) {
		t.Errorf("a corrupt history was read: %v", err)
	}
}

// A ledger.json written before the history (the whole state in it) opens,
// and its next snapshot moves the lists into the history.
func TestLedgerWithoutHistoryOpens(t *testing.T) {
	ws, l := newSyntheticLedger(t)
	id := l.ID()
	applyEvents(t, l, 0, 100)
	st := l.Campaign().State()
	state, err := json.Marshal(&st) // as a version 2 ledger wrote it
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := json.Marshal(ledgerFile{Version: 2, Seq: 100, State: state})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ws.CampaignDir(id)+"/ledger.json", old, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(ws.CampaignDir(id) + "/" + historyName)
	l, err = ws.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	applyEvents(t, l, 100, 130)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	want := runUncrashed(t, 130, 100)
	checkAgainst(t, ws, id, c, want)
}
