package model

import (
	"context"
	"errors"
	"testing"
)

func TestInitWeightsContextStopsWhenCancelled(t *testing.T) {
	cfg, err := Preset("llama-8b")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// llama-8b's bf16 weights are 16 GB: only a check before the first
	// allocation keeps this test from allocating them.
	w, err := InitWeightsContext(ctx, cfg, 0)
	if !errors.Is(err, context.Canceled) || w != nil {
		t.Fatalf("want context.Canceled and no weights, got %v (%d tensors)", err, len(w))
	}
}

func TestEagerStepContextLeavesTheCacheAsItWas(t *testing.T) {
	cfg, _ := Preset("toy-2L")
	w, err := InitWeights(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEager(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Step(3, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.StepContext(ctx, 4, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if e.Len() != 1 {
		t.Fatalf("cancelled step changed the cache length to %d", e.Len())
	}
	for l := range e.kc {
		if len(e.kc[l]) != cfg.KVDim() || len(e.vc[l]) != cfg.KVDim() {
			t.Fatalf("layer %d cache holds %d/%d values after a cancelled step, want %d", l, len(e.kc[l]), len(e.vc[l]), cfg.KVDim())
		}
	}
	if _, err := e.Step(4, 1); err != nil {
		t.Fatalf("step after a cancelled one: %v", err)
	}
}
