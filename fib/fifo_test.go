//go:build unix

package fib

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDatasetRefusesFIFOs: a named pipe where a Definition or a workload
// file belongs is reported as that file's error, at once; reading it used
// to hang the whole dataset read.
func TestDatasetRefusesFIFOs(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"definitions/gemm/a.json", "workloads/gemm/a.jsonl"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(full, 0o600); err != nil {
			t.Skipf("no FIFO here: %v", err)
		}
	}
	done := make(chan *Dataset, 1)
	go func() {
		ds, err := ReadDataset(dir)
		if err != nil {
			t.Error(err)
		}
		done <- ds
	}()
	select {
	case ds := <-done:
		if ds == nil {
			return
		}
		pipes := 0
		for _, r := range ds.Reports {
			if r.Err != nil && strings.Contains(r.Err.Error(), "named pipe") {
				pipes++
			}
		}
		if pipes != 2 {
			t.Fatalf("want both FIFOs reported as named pipes, got %+v", ds.Reports)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ReadDataset hangs on a FIFO")
	}
}
