package launch

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/build"
)

// emuSelftest replaces the emulator's kernel translation unit with
// scenarios that exercise the runtime directly (its header comment has the
// record they read and write).
//
//go:embed testdata/emu_selftest.cc
var emuSelftest []byte

// selftestEmulator builds the emulator with the self-test in place of the
// megakernel.
func selftestEmulator(t *testing.T) string {
	t.Helper()
	src := fstest.MapFS{}
	err := fs.WalkDir(kernels.EmulatorSources(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(kernels.EmulatorSources(), path)
		if path == kernels.EmulatorKernelFile {
			data = emuSelftest
		}
		src[path] = &fstest.MapFile{Data: data, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tc := build.ToolchainFromEnv()
	tc.EmulatorOpt = "-O0"
	b := &build.Builder{Toolchain: tc, Dir: t.TempDir(), EmulatorSources: src}
	a, err := b.BuildEmulator(context.Background(), build.EmulatorRequest{Arch: "sm_90a", Variant: kernels.DefaultVariant()})
	if err != nil {
		t.Fatalf("building the emulator self-test: %v", err)
	}
	return a.Path
}

const (
	selftestGrid    = 2
	selftestThreads = 64
)

// runSelftest runs one scenario and returns the report and the per-thread
// results.
func runSelftest(t *testing.T, exe string, scenario int, timeout string) (*EmulatorReport, []uint32) {
	t.Helper()
	dir := t.TempDir()
	image := make([]byte, 4096)
	image[0] = byte(scenario)
	for i := range 256 {
		image[64+i] = byte(i)
	}
	path := filepath.Join(dir, "image")
	if err := os.WriteFile(path, image, 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	hex := "0x" + strconv.FormatUint(EmulatorImageBase, 16)
	cmd := exec.Command(exe, "--image", path, "--base", hex, "--program", hex, "--grid", strconv.Itoa(selftestGrid),
		"--threads", strconv.Itoa(selftestThreads), "--smem", "8192", "--seed", "3", "--timeout-s", timeout, "--report", report)
	out, _ := cmd.CombinedOutput()
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("scenario %d: no report (%v): %s", scenario, err, out)
	}
	var r EmulatorReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("scenario %d: report %s: %v", scenario, data, err)
	}
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]uint32, selftestGrid*selftestThreads)
	for i := range results {
		off := 512 + 4*i
		results[i] = uint32(img[off]) | uint32(img[off+1])<<8 | uint32(img[off+2])<<16 | uint32(img[off+3])<<24
	}
	return &r, results
}

// TestEmulatorRuntime runs the runtime's models and checks one scenario at
// a time: shuffles (index, xor, down, up; widths; a partial mask), votes,
// barrier reductions, cp.async visible only after its wait, a bulk copy
// completing an mbarrier over two phases, the grid barrier and a release
// waking another block's acquire poll all behave as on a GPU (under a
// shuffled schedule); and each misuse is reported with its kind, never run
// on silently: a block whose threads all wait, a collective with an exited
// lane, divergent collectives, an uninitialised mbarrier, cp.async outside
// shared memory, a group never waited for, a memory fault, a launch past its
// deadline, a stack overflow, a thread leaving while others wait at a
// barrier, two copies racing to the same bytes.
func TestEmulatorRuntime(t *testing.T) {
	exe := selftestEmulator(t)
	r, results := runSelftest(t, exe, 0, "60")
	if r.Outcome != "ok" {
		t.Fatalf("the correct scenario: %+v", r)
	}
	for i, bad := range results {
		if bad != 0 {
			t.Errorf("block %d thread %d: checks failed, bits %b", i/selftestThreads, i%selftestThreads, bad)
		}
	}
	if r.Stats.BulkCopies != 4 || r.Stats.CPAsync != selftestGrid*selftestThreads || r.Stats.Preemptions == 0 {
		t.Errorf("the correct scenario exercised %+v", r.Stats)
	}
	for _, c := range []struct {
		scenario int
		outcome  string
		want     []string
	}{
		{1, "deadlock", []string{"deadlock inside block", "threads 0-4, 6-63 wait at __syncthreads", "thread 5 waits at a warp collective"}},
		{2, "error", []string{"exited"}},
		{3, "error", []string{"warp divergence", "kernel.cc:", "with the same mask"}},
		{4, "error", []string{"never initialised"}},
		{5, "error", []string{"dynamic shared memory"}},
		{6, "error", []string{"never waited for"}},
		{7, "error", []string{"memory fault at address 0x10", "outside the device memory image"}},
		{8, "timeout", []string{"deadline of 1 s"}},
		{9, "error", []string{"emulator stack"}},
		{10, "error", []string{"exited while", "__syncthreads"}},
		{11, "error", []string{"still in flight"}},
	} {
		t.Run(fmt.Sprint("scenario ", c.scenario), func(t *testing.T) {
			r, _ := runSelftest(t, exe, c.scenario, "1")
			if r.Outcome != c.outcome {
				t.Fatalf("outcome %q, want %q: %s", r.Outcome, c.outcome, r.Message)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Message, w) {
					t.Errorf("the report lacks %q: %s", w, r.Message)
				}
			}
			if c.outcome != "timeout" && r.Block < 0 {
				t.Errorf("the report names no block: %+v", r)
			}
			t.Logf("%s: %s (block %d, thread %d)", r.Outcome, r.Message, r.Block, r.Thread)
		})
	}
}
