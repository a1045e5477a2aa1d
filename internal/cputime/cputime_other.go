//go:build !unix

package cputime

import "time"

// Total is the process's CPU time where the platform says it; here it
// does not.
func Total() (time.Duration, bool) { return 0, false }

// System is the process's system CPU time where the platform says it;
// here it does not.
func System() (time.Duration, bool) { return 0, false }
