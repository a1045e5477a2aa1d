package cputime

import (
	"runtime"
	"testing"
	"time"
)

// Work done on this goroutine shows in Total, and System never exceeds it.
func TestTotalGrowsWithWork(t *testing.T) {
	before, ok := Total()
	if !ok {
		t.Skipf("no process CPU time on %s", runtime.GOOS)
	}
	spin := time.Now()
	x := uint64(1)
	for time.Since(spin) < 50*time.Millisecond || x == 0 {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	after, _ := Total()
	if after <= before {
		t.Fatalf("Total did not grow over 50 ms of work: %v then %v", before, after)
	}
	sys, ok := System()
	if !ok || sys < 0 || sys > after {
		t.Fatalf("System = %v, %v; want within [0, Total=%v]", sys, ok, after)
	}
}
