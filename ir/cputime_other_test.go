//go:build !unix

package ir_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
