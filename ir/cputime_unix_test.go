//go:build unix

package ir_test

import (
	"syscall"
	"time"
)

// processCPU (as in validate's benchmarks) is the user+system CPU time the process has used, so that a
// benchmark can report its cost independently of other load on the machine.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
