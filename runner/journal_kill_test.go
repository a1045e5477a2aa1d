package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/proctest"
)

// crashChildEnv makes TestCrashChild the child of the SIGKILL tests:
// "MODE WORKSPACE EVENTS". The child creates (or reopens) the synthetic
// campaign in WORKSPACE and applies the stream's events up to EVENTS; with
// MODE a snapshot stage it SIGKILLs itself at that stage of the first
// snapshot (at "writing", after leaving half of ledger.json's temporary
// file, as a kill inside the atomic write would).
const crashChildEnv = "AMK_RUNNER_CRASH_CHILD"

func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashChildEnv)
	if spec == "" {
		t.Skip("the child of the SIGKILL tests")
	}
	var mode, dir string
	var events int
	if _, err := fmt.Sscan(spec, &mode, &dir, &events); err != nil {
		t.Fatalf("%s=%q: %v", crashChildEnv, spec, err)
	}
	if mode == snapshotWriting || mode == snapshotWritten {
		// The parent expects the first snapshot at SnapshotEvery events: on
		// a loaded machine, replayBudget of state machine time can pass
		// sooner and snapshot (and so die) after a few events.
		replayBudget = time.Hour
		snapshotHook = func(stage, dir string, seq uint64, data []byte) {
			if stage != mode || seq == 0 {
				return
			}
			if stage == snapshotWriting {
				_ = os.WriteFile(filepath.Join(dir, ".ledger.json.tmp-777"), data[:len(data)/2], 0o644)
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	ws, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := ws.Create(benchStart())
	if err != nil {
		t.Fatal(err)
	}
	applyEvents(t, l, int(l.seq), events)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// startCrashChild runs TestCrashChild in a new process.
func startCrashChild(t *testing.T, ctx context.Context, mode, dir string, events int) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+mode+" "+dir+" "+strconv.Itoa(events))
	if err := proctest.Start(t, cmd); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// killedBySIGKILL reports whether the child died of SIGKILL.
func killedBySIGKILL(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// Real kill -9s of a process recording trials, at moments the test does not
// choose (in a journal append, an outbox append, a snapshot, anywhere): after
// each, the next process carries on, and in the end the campaign is the
// uncrashed run of as many events, every row, trial and corpus line once.
func TestJournalSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ws := &Workspace{Dir: dir}
	id := ""
	rows := 0
	for round := range 4 {
		cmd := startCrashChild(t, ctx, "run", dir, 1<<20)
		// Wait for progress, then kill at a moment of no one's choosing.
		for {
			if ids, _ := (&Workspace{Dir: dir}).IDs(); len(ids) == 1 {
				id = ids[0]
				have, _ := flywheel.ReadRows(filepath.Join(ws.CampaignDir(id), "results.tsv"))
				if len(have) >= rows+40 {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatal("the child made no progress")
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(20000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if !killedBySIGKILL(cmd) {
			t.Fatalf("round %d: the child was not killed: %v", round, cmd.ProcessState)
		}
		have, _ := flywheel.ReadRows(filepath.Join(ws.CampaignDir(id), "results.tsv"))
		rows = len(have)
	}
	l, err := ws.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Logf("%d events survived 4 kills (%d since the last snapshot)", l.seq, l.seq-l.snapSeq)
	checkAgainst(t, ws, id, l.Campaign(), runUncrashed(t, int(l.seq)))
}

// Real kill -9s inside a snapshot: before ledger.json's rename and between
// the rename and emptying the journal.
func TestJournalSurvivesSIGKILLInASnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, stage := range []string{snapshotWriting, snapshotWritten} {
		t.Run(stage, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dir := t.TempDir()
			cmd := startCrashChild(t, ctx, stage, dir, SnapshotEvery+10)
			_ = cmd.Wait()
			if !killedBySIGKILL(cmd) {
				t.Fatalf("the child did not die in the snapshot: %v", cmd.ProcessState)
			}
			ws := &Workspace{Dir: dir}
			ids, err := ws.IDs()
			if err != nil || len(ids) != 1 {
				t.Fatalf("campaigns %v, %v", ids, err)
			}
			dirOf := ws.CampaignDir(ids[0])
			temps, _ := filepath.Glob(filepath.Join(dirOf, ".ledger.json.tmp-*"))
			if (stage == snapshotWriting) != (len(temps) == 1) {
				t.Fatalf("temporary files %v after a kill at %q", temps, stage)
			}
			want := runUncrashed(t, SnapshotEvery)
			v, err := ws.View(ids[0])
			if err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, ws, ids[0], v, want)
			l, err := ws.Open(ids[0])
			if err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, ws, ids[0], l.Campaign(), want)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if temps, _ := filepath.Glob(filepath.Join(dirOf, ".ledger.json.tmp-*")); len(temps) > 0 {
				t.Errorf("temporary files left after the reopen: %v", temps)
			}
			// The next process finishes the run.
			cmd = startCrashChild(t, ctx, "run", dir, SnapshotEvery+10)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the next run: %v", err)
			}
			v, err = ws.View(ids[0])
			if err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, ws, ids[0], v, runUncrashed(t, SnapshotEvery+10))
			if data, _ := os.ReadFile(filepath.Join(dirOf, journalName)); strings.TrimSpace(string(data)) != "" {
				t.Errorf("the journal holds %d bytes after a clean close", len(data))
			}
		})
	}
}
