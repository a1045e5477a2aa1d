package pipeline

import (
	"fmt"
	"strings"
)

// Listing is the issue stream the checker proves, with the waits the edge
// rules derive written as counter waits (vmcnt(N): at most N global loads
// left outstanding; lgkmcnt(N) likewise for LDS loads): the prologue, then
// the second main iteration (the steady state), one op per line with its
// absolute LDS stage.
func Listing(s *Schedule) []string {
	stream, _ := analyze(s, 2)
	var out []string
	for _, in := range stream {
		if in.iter > 0 && in.iter != 1 || in.iter == 0 && !in.drain {
			continue
		}
		if in.drain {
			out = append(out, "-- prologue drain: s_waitcnt vmcnt(0) lgkmcnt(0); main iteration 0 not listed")
			continue
		}
		if in.halfStart {
			out = append(out, fmt.Sprintf("-- iteration %d, half %d (stage %d, k-block %d): barrier", in.iter, in.part,
				in.part, in.half))
		}
		var waits []string
		if in.vmcnt >= 0 {
			waits = append(waits, fmt.Sprintf("vmcnt(%d)", in.vmcnt))
		}
		if in.lgkmcnt >= 0 {
			waits = append(waits, fmt.Sprintf("lgkmcnt(%d)", in.lgkmcnt))
		}
		wait := ""
		if len(waits) > 0 {
			wait = "s_waitcnt " + strings.Join(waits, " ")
		}
		where := "prologue"
		if in.iter >= 0 {
			where = fmt.Sprintf("mini-iter %d", in.mini)
		} else if in.origin == "bootstrap" {
			where = "bootstrap"
		}
		op := in.op.String()
		if in.stage >= 0 {
			op = fmt.Sprintf("%s -> stage %d", op, in.stage)
		}
		out = append(out, fmt.Sprintf("%-12s %-28s %s", where, wait, op))
	}
	return out
}
