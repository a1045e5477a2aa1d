//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Total is the user plus system CPU time the process has used so far;
// ok is false where the platform does not say.
func Total() (d time.Duration, ok bool) {
	ru, ok := usage()
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ok
}

// System is the system (kernel) CPU time the process has used so far; ok
// is false where the platform does not say.
func System() (d time.Duration, ok bool) {
	ru, ok := usage()
	return time.Duration(ru.Stime.Nano()), ok
}

func usage() (syscall.Rusage, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return syscall.Rusage{}, false
	}
	return ru, true
}
