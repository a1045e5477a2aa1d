//go:build unix

package launch

import "syscall"

// alive reports whether a process exists (signal 0 probes without killing).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
