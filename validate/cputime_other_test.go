//go:build !unix

package validate

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
