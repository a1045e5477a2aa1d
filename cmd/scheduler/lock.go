package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockName is the file a scheduler locks in its workspace.
const lockName = "scheduler.lock"

// workspaceLock is one scheduler's exclusive hold on a workspace.
type workspaceLock struct{ f *os.File }

// lockWorkspace takes the workspace's scheduler lock (flock, released by the
// kernel when the process dies) or explains who holds it.
func lockWorkspace(dir string) (*workspaceLock, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("workspace lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "unknown process"
		}
		return nil, fmt.Errorf("workspace %s is in use by another scheduler (%s holds %s); run one scheduler per workspace", dir, who, path)
	}
	_ = f.Truncate(0)
	host, _ := os.Hostname()
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d on %s\n", os.Getpid(), host)), 0)
	_ = f.Sync()
	return &workspaceLock{f: f}, nil
}

// release drops the lock.
func (l *workspaceLock) release() error { return l.f.Close() }
