package rank

import (
	"errors"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
)

// Order puts the fastest first, keeps ties in order and numbers from 1.
func TestOrder(t *testing.T) {
	e := []Entry{{File: "b", LatencyUS: 3}, {File: "a", LatencyUS: 1}, {File: "c", LatencyUS: 3}}
	Order(e)
	if e[0].File != "a" || e[1].File != "b" || e[2].File != "c" || e[0].Rank != 1 || e[2].Rank != 3 {
		t.Fatalf("order %+v", e)
	}
}

// A graph the check rejects gets no latency.
func TestPredictNeedsAPass(t *testing.T) {
	target, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	g := &mpk.Graph{Tasks: []mpk.Task{{}}} // a task of no known type
	if _, rep, err := Predict("g.json", g, target, mpk.CheckOptions{}); !errors.Is(err, ErrRejected) || rep.OK {
		t.Fatalf("a rejected graph: %v (report ok %v)", err, rep.OK)
	}
}
