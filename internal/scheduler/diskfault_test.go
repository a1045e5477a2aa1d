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
// campaign whose workspace is on a real filesystem that fills up stalls and
// goes on by itself once space is freed. (A read-only remount is refused by
// the kernel while the ledger's files are open for writing, so that fault
// is not made here.) It
// mounts a small tmpfs, so it runs only when asked (AMK_DISK_FAULTS=1) by
// a user allowed to mount; it asserts that the stall is reported and that
// every experiment is recorded once, and logs the times (FIGURE lines).
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
	if _, err := f.Do(ctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpStop}); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the last trials", func() bool { return len(status(t, f, id).InFlight) == 0 })
	checkLedger(t, ws, id, status(t, f, id).ExperimentsRun)
}
