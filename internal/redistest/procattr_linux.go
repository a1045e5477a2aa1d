package redistest

import "syscall"

// procAttr kills redis-server when the test process dies, so a crashed or
// timed-out test binary leaves no server behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
