package scheduler

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/waitfor"
)

// TestRealDiskFaults measures, for docs/results/fleet-faults.md, how a
// campaign whose workspace is on a real filesystem stalls when the
// filesystem fills up or is remounted read-only, and goes on by itself,
// without a restart, once space is freed or the filesystem is remounted
// writable. (The read-only remount is possible at all because the ledger
// keeps no file open for writing between two writes.) It mounts a small
// tmpfs, so it runs only when asked (AMK_DISK_FAULTS=1) by a user allowed
// to mount; it asserts that the stall is reported and that every
// experiment is recorded once, and logs the times (FIGURE lines).
func TestRealDiskFaults(t *testing.T) {
	if os.Getenv("AMK_DISK_FAULTS") == "" {
		t.Skip("set AMK_DISK_FAULTS=1 to mount a tmpfs and fill it (needs the right to mount)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	ws, err := runner.OpenWorkspace(mnt)
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, ws, Options{Transport: dispatch.NewLocal(2, evaluate(50*time.Millisecond))})
	ctx := context.Background()
	const budget = 400
	id, _, _, err := f.Create(ctx, toyRequest(budget))
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "five experiments", func() bool { return status(t, f, id).ExperimentsRun >= 5 })
	stalled := func() bool {
		err := f.Health(ctx)
		return err != nil && strings.Contains(err.Error(), "stalled")
	}
	recovery := func(kind string, fault, heal func()) {
		fault()
		faulted := time.Now()
		waitfor.Cond(t, time.Minute, kind+": the stall reported", stalled)
		seen := time.Since(faulted)
		time.Sleep(2 * time.Second) // stalled a while
		n := status(t, f, id).ExperimentsRun
		heal()
		healed := time.Now()
		waitfor.Cond(t, time.Minute, kind+": an experiment after the disk recovered", func() bool { return status(t, f, id).ExperimentsRun > n })
		resumed := time.Since(healed)
		waitfor.Cond(t, time.Minute, kind+": healthy", func() bool { return f.Health(ctx) == nil })
		t.Logf("FIGURE disk-%s: stall reported %.2fs after the fault; next experiment %.2fs after the disk recovered; healthy %.2fs after",
			kind, seen.Seconds(), resumed.Seconds(), time.Since(healed).Seconds())
	}
	filler := filepath.Join(mnt, "filler")
	recovery("full", func() {
		fh, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		chunk := make([]byte, 64<<10)
		for {
			if _, err := fh.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				return
			}
		}
	}, func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	})
	recovery("read-only", func() { remount(t, mnt, "ro") }, func() { remount(t, mnt, "rw") })
	if _, err := f.Do(ctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpStop}); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the last trials", func() bool { return len(status(t, f, id).InFlight) == 0 })
	checkLedger(t, ws, id, status(t, f, id).ExperimentsRun)
}

// remount remounts the filesystem at mnt with mode "ro" or "rw". The kernel
// refuses a read-only remount ("mount point is busy") while a file on it
// is open for writing: the ledger opens its files only for the moment of a
// write, so a refusal is tried again a few times (the tries are logged),
// and a lasting one means some file is held open for writing.
func remount(t *testing.T, mnt, mode string) {
	t.Helper()
	var out []byte
	var err error
	for try := 1; try <= 50; try++ {
		if out, err = exec.Command("mount", "-o", "remount,"+mode, mnt).CombinedOutput(); err == nil {
			if try > 1 {
				t.Logf("remount,%s took %d tries (a write was in progress)", mode, try)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("mount -o remount,%s %s: %v %s", mode, mnt, err, out)
}
