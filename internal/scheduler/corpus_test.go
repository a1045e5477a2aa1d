package scheduler

import (
	"context"
	"testing"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
)

// corpusRecord is a kept toy point on h200 with a predicted latency.
func corpusRecord(latency float64) flywheel.Record {
	return flywheel.Record{Model: "toy", GPU: "h200", Regime: flywheel.RegimeSingle, Correctness: flywheel.CorrectPass,
		LatencyUS: latency, BoundUS: 1, PctOfRoofline: latency * 100, Schedule: schedule.Default().Value(),
		IRVersion: "test", ABIVersion: "test", TS: 1780000000, LatencyKind: flywheel.KindPredicted,
		Shape: flywheel.Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}
}

// The fleet reads the corpus once and then what drivers (or anyone)
// appended: each warm campaign still starts from the whole corpus as it is
// at its creation, and a cold one from none.
func TestFleetCreateSeesTheCorpusAsItGrows(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	if err := flywheel.AppendCorpus(ws.CorpusPath(), corpusRecord(3), corpusRecord(4)); err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, ws, Options{})
	prior := func(name string, cold bool) int {
		t.Helper()
		req := toyRequest(1)
		req.Name, req.Cold = name, cold
		id, _, _, err := f.Create(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := f.Read(id, func(c *campaign.Campaign) { n = len(c.State().Prior) }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prior("warm1", false); n != 2 {
		t.Fatalf("first warm campaign's prior has %d examples, want the corpus's 2", n)
	}
	if err := flywheel.AppendCorpus(ws.CorpusPath(), corpusRecord(5)); err != nil {
		t.Fatal(err)
	}
	if n := prior("warm2", false); n < 3 {
		t.Fatalf("second warm campaign's prior has %d examples, want the 3 of the corpus (and any its predecessor kept)", n)
	}
	if n := prior("cold", true); n != 0 {
		t.Fatalf("cold campaign's prior has %d examples", n)
	}
}
