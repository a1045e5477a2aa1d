package pipeline

import (
	"fmt"
	"strings"
)

// Lines renders a report one finding per line: hazards as they are,
// advisories prefixed "note: ".
func (r Report) Lines() []string {
	var out []string
	for _, f := range r.Findings {
		if f.Advisory {
			out = append(out, "note: "+f.String())
		} else {
			out = append(out, f.String())
		}
	}
	return out
}

// Text renders a prediction for people: the utilisation, where the cycles
// go, and every latency it used.
func (t Timing) Text() string {
	var b strings.Builder
	l := t.Latencies
	fmt.Fprintf(&b, "%s on %s: predicted MMA utilisation %.1f%% (matrix pipe busy %.0f of %.0f cycles per iteration)\n",
		t.Schedule, t.Target, 100*t.MMAUtilisation, t.MMABusyPerIter, t.CyclesPerIteration)
	fmt.Fprintf(&b, "  stalls per iteration: global counter %.0f, LDS counter %.0f, matrix pipe busy %.0f, barriers %.0f; prologue %d cycles\n",
		t.StallVM, t.StallLDS, t.StallMMAPipe, t.BarrierCycles, t.PrologueCycles)
	fmt.Fprintf(&b, "  latencies used (cycles: latency/busy/issue): global load %d/%d/%d, LDS fragment %d/%d/%d, MMA %d/%d/%d, "+
		"compute %d/%d/%d; wait overhead %d, barrier %d\n",
		l.GlobalLoad.Latency, l.GlobalLoad.Busy, l.GlobalLoad.Issue, l.LDSLoad.Latency, l.LDSLoad.Busy, l.LDSLoad.Issue,
		l.MMA.Latency, l.MMA.Busy, l.MMA.Issue, l.Compute.Latency, l.Compute.Busy, l.Compute.Issue, l.WaitOverhead, l.Barrier)
	fmt.Fprintf(&b, "  quadrant: %s; %s\n", l.Quadrant, l.Source)
	fmt.Fprintf(&b, "  latency_kind: %s (no AMD device is attached to amk; nothing here was measured)\n", t.Kind)
	return b.String()
}
