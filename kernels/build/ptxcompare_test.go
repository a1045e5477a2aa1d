package build

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amk-dev/amk/kernels"
)

// TestPTXMatchesRevision is an opt-in proof that a change to the kernel
// sources left the device code alone (the PTX seam of kernels/cuda/ptx.cuh
// was the first such change): it compiles the PTX of every variant of
// PTXCompareVariants with the sources of git revision $AMK_PTX_BASE and with
// the embedded sources, through the build cache (nvcc with the build's own
// arguments, -lineinfo included), and requires the two to be identical once
// the debug lines that name source files and lines (.file, .loc) are
// dropped. nvcc comes from FindNVCC; $AMK_KERNEL_CACHE keeps the modules
// between runs, $AMK_BUILD_JOBS sets the parallel compiles, and
// $AMK_PTX_VARIANTS (a regular expression matched against "arch variant", as
// the log names them) keeps only the variants it matches. Without
// $AMK_PTX_BASE or an nvcc it is skipped. docs/results/emu.md records a run.
func TestPTXMatchesRevision(t *testing.T) {
	base := os.Getenv("AMK_PTX_BASE")
	if base == "" {
		t.Skip("set AMK_PTX_BASE to a git revision to compare the PTX of its kernel sources with this tree's")
	}
	nvcc := FindNVCC()
	if nvcc.Path == "" {
		t.Skip("no nvcc, so no PTX to compare: " + NoNVCCHint)
	}
	old := t.TempDir()
	if err := extractKernels(base, old); err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv(EnvCache)
	if cache == "" {
		cache = t.TempDir()
	}
	tc := ToolchainFromEnv()
	tc.NVCC = nvcc.Path
	// a cold sm_90a compile takes minutes on a loaded 2-core machine
	before := &Builder{Toolchain: tc, Dir: cache, Sources: os.DirFS(old), Timeout: time.Hour}
	after := &Builder{Toolchain: tc, Dir: cache, Timeout: time.Hour}
	jobs := runtime.GOMAXPROCS(0)
	if j, err := strconv.Atoi(os.Getenv("AMK_BUILD_JOBS")); err == nil && j > 0 {
		jobs = j
	}
	type job struct {
		arch string
		v    kernels.Variant
	}
	keep := regexp.MustCompile("")
	if expr := os.Getenv("AMK_PTX_VARIANTS"); expr != "" {
		var err error
		if keep, err = regexp.Compile(expr); err != nil {
			t.Fatalf("AMK_PTX_VARIANTS: %v", err)
		}
	}
	var all []job
	for _, arch := range []string{"sm_90a", "sm_80", "sm_75"} {
		for _, v := range PTXCompareVariants(arch) {
			if keep.MatchString(arch + " " + v.String()) {
				all = append(all, job{arch, v})
			}
		}
	}
	if len(all) == 0 {
		t.Fatalf("AMK_PTX_VARIANTS %q matches no variant", os.Getenv("AMK_PTX_VARIANTS"))
	}
	type result struct {
		same   bool
		detail string
		err    error
	}
	results := make([]result, len(all))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	ctx := context.Background()
	for i, j := range all {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var ptx [2][]string
			for k, b := range []*Builder{before, after} {
				a, err := b.Build(ctx, Request{Arch: j.arch, Output: PTX, Variant: j.v})
				if err != nil {
					results[i].err = err
					return
				}
				data, err := a.Data()
				if err != nil {
					results[i].err = err
					return
				}
				ptx[k] = codeLines(data)
			}
			results[i].same, results[i].detail = firstDifference(ptx[0], ptx[1])
		})
	}
	wg.Wait()
	for i, r := range results {
		name := all[i].arch + " " + all[i].v.String()
		switch {
		case r.err != nil:
			t.Errorf("%s: %v", name, r.err)
		case !r.same:
			t.Errorf("%s: the PTX differs from %s's: %s", name, base, r.detail)
		default:
			t.Logf("%s: PTX identical to %s's", name, base)
		}
	}
	t.Logf("%d variants compared (sources %.12s against %s)", len(all), kernels.SourceHash(), base)
}

// PTXCompareVariants are the variants whose PTX TestPTXMatchesRevision
// compares for an architecture: on sm_90a every spot and extreme variant and
// the streaming ring with per-lane cp.async instead of the bulk copies
// (ring_bulk=0); on older architectures the extreme variants (default,
// lowest and highest search knobs, the two ring sizes) and the default with
// the per-tile cp.async path off.
func PTXCompareVariants(arch string) []kernels.Variant {
	seen := map[string]bool{}
	var out []kernels.Variant
	add := func(vs ...kernels.Variant) {
		for _, v := range vs {
			if !seen[v.String()] {
				seen[v.String()] = true
				out = append(out, v)
			}
		}
	}
	add(ExtremeVariants()...)
	noCopy := kernels.DefaultVariant()
	noCopy["cpasync"] = 0
	add(noCopy)
	if arch == "sm_90a" || arch == "sm_90" {
		add(SpotVariants()...)
		for _, v := range RingVariants() {
			w := kernels.Variant{}
			maps.Copy(w, v)
			w["ring_bulk"] = 0
			add(w)
		}
	}
	return out
}

// extractKernels writes abi.h and cuda/ of the kernels package at git
// revision rev under dir (the layout of kernels.Sources()).
func extractKernels(rev, dir string) error {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("not in a git checkout: %w", err)
	}
	root := strings.TrimSpace(string(top))
	list, err := exec.Command("git", "-C", root, "ls-tree", "-r", "--name-only", rev, "kernels/abi.h", "kernels/cuda").Output()
	if err != nil {
		return fmt.Errorf("git ls-tree %s: %w", rev, err)
	}
	n := 0
	for path := range strings.FieldsSeq(string(list)) {
		data, err := exec.Command("git", "-C", root, "show", rev+":"+path).Output()
		if err != nil {
			return fmt.Errorf("git show %s:%s: %w", rev, path, err)
		}
		target := filepath.Join(dir, strings.TrimPrefix(path, "kernels/"))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("revision %s has no kernel sources", rev)
	}
	return nil
}

// codeLines is the PTX without what -lineinfo adds about the source: the
// lines that name files and line numbers (.file, .loc) and the .debug_str
// section (the names of inlined functions those lines refer to, and a name
// derived from the source's hash), and without blank lines: what the seam
// may not change.
func codeLines(ptx []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(ptx))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	debug := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, ".section") && strings.Contains(line, ".debug_"):
			debug = true
			continue
		case debug:
			debug = line != "}"
			continue
		case line == "" || strings.HasPrefix(line, ".file") || strings.HasPrefix(line, ".loc"):
			continue
		}
		out = append(out, line)
	}
	return out
}

// firstDifference compares two line lists and describes the first line
// where they part.
func firstDifference(a, b []string) (bool, string) {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return false, fmt.Sprintf("code line %d: %q, now %q", i+1, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return false, fmt.Sprintf("%d code lines, now %d", len(a), len(b))
	}
	return true, ""
}
