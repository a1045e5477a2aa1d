package pipeline

import (
	"strings"
	"testing"
)

// TestEveryOutputQuadrantOnce: the 4-wave schedule with its first MMA
// turned from quadrant (0,0) into (0,1) computes (0,1) twice per k-step and
// (0,0) never; the result is a wrong GEMM, however well the loads are
// ordered.
func TestEveryOutputQuadrantOnce(t *testing.T) {
	s := load(t, "amd-4wave-fp8")
	s.Body[0].Ops[2].Quadrant = [2]int{0, 1}
	r := Check(s)
	if r.Safe() {
		t.Fatalf("a schedule that computes quadrant (0,1) twice and (0,0) never is SAFE: %v", r.Findings)
	}
	var twice, never bool
	for _, f := range r.Hazards() {
		if f.Rule != RuleCoverage {
			continue
		}
		twice = twice || strings.Contains(f.Message, "output quadrant (0,1) twice")
		never = never || strings.Contains(f.Message, "output quadrant (0,0) never")
	}
	if !twice || !never {
		t.Fatalf("want coverage hazards for (0,1) twice and (0,0) never, got %v", r.Hazards())
	}
	// Every safe schedule in testdata covers every quadrant once.
	for _, name := range []string{"amd-4wave-fp8", "pingpong-default"} {
		if r := Check(load(t, name)); !r.Safe() {
			t.Fatalf("%s: %v", name, r.Hazards())
		}
	}
}
