package trial

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// A spec's digest survives the queue's encode and decode, and changes
// with anything that changes what is evaluated (the point, the position,
// the campaign's incarnation).
func TestSpecDigest(t *testing.T) {
	spec := Spec{CampaignID: "c", TrialID: 3, Model: "toy", GPU: "h200", Device: "cpu",
		Point: json.RawMessage(`{ "threads_per_block" : 128 }`), Token: 7, Incarnation: "a1"}
	wire, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(wire, &back); err != nil {
		t.Fatal(err)
	}
	if back.Digest() != spec.Digest() || len(spec.Digest()) != 64 {
		t.Fatalf("digest %q after the round trip, %q before", back.Digest(), spec.Digest())
	}
	for name, change := range map[string]func(*Spec){
		"point":       func(s *Spec) { s.Point = json.RawMessage(`{"threads_per_block": 256}`) },
		"position":    func(s *Spec) { s.Pos = 1 },
		"incarnation": func(s *Spec) { s.Incarnation = "b2" },
		"model":       func(s *Spec) { s.Model = "small" },
	} {
		other := spec
		change(&other)
		if other.Digest() == spec.Digest() {
			t.Errorf("another %s, the same digest", name)
		}
	}
}

// CheckBound accepts an outcome of the spec it answers and refuses one of
// another spec, another trial, or a verdict about something else.
func TestCheckBound(t *testing.T) {
	spec := Spec{CampaignID: "c", TrialID: 0, Model: "toy", GPU: "h200", Device: "cpu",
		Point: json.RawMessage(`{"threads_per_block": 128}`), Token: 7, Incarnation: "a1"}
	honest := Evaluate(context.Background(), spec, Options{})
	honest.SpecDigest = spec.Digest()
	if err := CheckBound(spec, honest); err != nil {
		t.Fatalf("the honest outcome: %v", err)
	}
	other := spec
	other.Point = json.RawMessage(`{"threads_per_block": 256}`)
	replaced := Evaluate(context.Background(), other, Options{})
	replaced.SpecDigest = other.Digest()
	earlier := spec
	earlier.Incarnation = "z9"
	for name, o := range map[string]Outcome{
		"another spec's outcome":        replaced,
		"an earlier incarnation's":      func() Outcome { o := honest; o.SpecDigest = earlier.Digest(); return o }(),
		"no digest":                     func() Outcome { o := honest; o.SpecDigest = ""; return o }(),
		"another trial":                 func() Outcome { o := honest; o.TrialID = 1; return o }(),
		"a verdict about another point": func() Outcome { o := replaced; o.SpecDigest = spec.Digest(); return o }(),
		"a verdict at another position": func() Outcome {
			o := honest
			v := *o.Verdict
			v.Pos = new(5)
			o.Verdict = &v
			return o
		}(),
	} {
		if err := CheckBound(spec, o); !errors.Is(err, ErrNotIssued) {
			t.Errorf("%s: %v, want ErrNotIssued", name, err)
		}
	}
	legacy := spec
	legacy.Incarnation = ""
	undigested := Evaluate(context.Background(), legacy, Options{})
	if err := CheckBound(legacy, undigested); err != nil {
		t.Errorf("an outcome without a digest for a spec without an incarnation: %v", err)
	}
}

// A workload trial's verdict is for the workload's batch, whatever the
// spec's own batch field says: it answers its spec (it used to be refused
// for ever, so that a workload campaign never recorded a trial).
func TestAWorkloadVerdictAnswersItsSpec(t *testing.T) {
	w := Workload{PromptLens: []int{40, 8}, GenLen: 5, Batch: 2}
	spec := Spec{CampaignID: "c", TrialID: 1, Model: "toy", GPU: "h200", Device: "cpu", Point: json.RawMessage(`{}`), Token: 7, Workload: &w, Incarnation: "x"}
	o := Evaluate(context.Background(), spec, Options{Models: testModels})
	o.SpecDigest = spec.Digest() // as the dispatchers stamp it
	if o.Verdict == nil || o.Verdict.Batch != 2 {
		t.Fatalf("the workload verdict: %+v %+v", o.Verdict, o.Failure)
	}
	if err := CheckBound(spec, o); err != nil {
		t.Fatal(err)
	}
}
