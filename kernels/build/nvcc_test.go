package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/amk-dev/amk/kernels"
)

// TestKernelsCompileWithoutSpills compiles kernel variants with the nvcc
// that FindNVCC finds, in parallel ($AMK_BUILD_JOBS, default GOMAXPROCS),
// into $AMK_KERNEL_CACHE when set (a GPU visit warms its cache this way). It
// fails on any compile error and on any function (kernel or out-of-line
// device function) that spills registers, whatever the block size; without
// an nvcc it is skipped with a message saying how to get one.
//
// The architecture is $AMK_NVCC_ARCH, else sm_90a when the nvcc is release
// 12 or newer (what `make test` installs: Debian's 12.4, which compiles the
// streaming ring's TMA path), else sm_90, saying so (Debian's 11.8, the
// fallback when 12.4 cannot be fetched, has no sm_90a and no TMA path).
//
// The variants, by AMK_KERNEL_VARIANTS: unset, `make test`'s compile smoke,
// the default variant and the largest streaming ring (whose TMA path nvcc 12
// compiles for sm_90a), about 100 CPU-seconds each, built in parallel;
// "default", the default alone; "visit", VisitVariants (what `make gpu-bin`
// carries to a GPU visit, and what a visit builds first when none is
// carried); "extreme",
// ExtremeVariants (the default, and every search knob at its smallest and at
// its largest choice; `make kernels-sweep`); "spot", SpotVariants (what a GPU
// visit builds ahead).
func TestKernelsCompileWithoutSpills(t *testing.T) {
	nvcc := FindNVCC()
	if nvcc.Path == "" {
		t.Skip("no nvcc, so the kernels are not compiled: " + NoNVCCHint)
	}
	tc := ToolchainFromEnv()
	tc.NVCC = nvcc.Path
	// A visit bounds this test with timeout(1), which signals the test
	// binary: cancel the builds then, so that their nvcc process groups are
	// killed instead of outliving the step and competing with the next one.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	b := &Builder{Toolchain: tc}
	version, err := b.ToolchainVersion(ctx)
	if err != nil {
		t.Fatalf("%s (from %s) does not run: %v", nvcc.Path, nvcc.From, err)
	}
	release := parseRelease(version)
	arch := os.Getenv("AMK_NVCC_ARCH")
	if arch == "" {
		arch = "sm_90a"
		if !CompilesSM90a(release) {
			arch = "sm_90"
			t.Logf("nvcc release %q cannot compile sm_90a: compiling for sm_90 instead, without the streaming ring's TMA path "+
				"(make test installs Debian's nvcc 12.4 when Debian trixie's packages can be fetched; this is its 11.8 fallback)", release)
		}
	}
	cache := os.Getenv(EnvCache)
	if cache == "" {
		cache = t.TempDir()
	}
	jobs := runtime.GOMAXPROCS(0)
	if j, err := strconv.Atoi(os.Getenv("AMK_BUILD_JOBS")); err == nil && j > 0 {
		jobs = j
	}
	b.Dir = cache
	t.Logf("%s (from %s) for %s, %d jobs: %s", nvcc.Path, nvcc.From, arch, jobs, version[strings.LastIndex(version, "\n")+1:])

	var variants []kernels.Variant
	switch set := os.Getenv("AMK_KERNEL_VARIANTS"); set {
	case "spot":
		variants = SpotVariants()
	case "":
		// The smoke: the default, and the largest streaming ring (on
		// sm_90a with nvcc >= 12, its TMA path).
		ring := RingVariants()
		variants = []kernels.Variant{kernels.DefaultVariant(), ring[len(ring)-1]}
	case "default":
		variants = []kernels.Variant{kernels.DefaultVariant()}
	case "visit":
		variants = VisitVariants()
	case "extreme":
		variants = ExtremeVariants()
	default:
		t.Fatalf("AMK_KERNEL_VARIANTS=%q: want default, visit, spot or extreme (unset: the default and the largest ring)", set)
	}
	type result struct {
		a   *Artifact
		err error
		dt  time.Duration
	}
	results := make([]result, len(variants))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, v := range variants {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			a, err := b.Build(ctx, Request{Arch: arch, Variant: v})
			results[i] = result{a, err, time.Since(start)}
		})
	}
	wg.Wait()
	for i, r := range results {
		name := variants[i].String()
		if r.err != nil && ctx.Err() != nil {
			t.Errorf("%s: not built: the test was cancelled by a signal", name)
			continue
		}
		if r.err != nil {
			var ce *CompileError
			if errors.As(r.err, &ce) {
				t.Errorf("%s: C++ error:\n%v", name, r.err)
			} else {
				t.Errorf("%s: %v", name, r.err)
			}
			continue
		}
		t.Logf("%s: %s", name, summarize(r.a, r.dt))
		data, err := r.a.Data()
		if err != nil || !bytes.HasPrefix(data, []byte("\x7fELF")) {
			t.Errorf("%s: not a cubin (%v)", name, err)
			continue
		}
		res := ParseResources(r.a.Log)
		if len(res) == 0 {
			t.Errorf("%s: no resource usage in the nvcc log:\n%s", name, r.a.Log)
		}
		seen := map[string]bool{}
		for _, k := range res {
			seen[k.Kernel] = true
			if k.Spills() {
				t.Errorf("%s: %s spills registers (%d registers, %d B spill stores, %d B spill loads)",
					name, k.Kernel, k.Registers, k.SpillStoreBytes, k.SpillLoadBytes)
			}
		}
		for _, k := range []string{kernels.MegakernelName, "amk_entry_gemv_tile"} {
			if !seen[k] {
				t.Errorf("%s: the module lacks kernel %s", name, k)
			}
		}
	}
}

// summarize is one line per variant: the VM kernel's registers and stack,
// the cache outcome and the wall time.
func summarize(a *Artifact, dt time.Duration) string {
	for _, k := range ParseResources(a.Log) {
		if k.Kernel == kernels.MegakernelName {
			hit := "compiled"
			if a.Hit {
				hit = "cache hit"
			}
			return fmt.Sprintf("%s %d registers, %d B stack, %d/%d B spilled (%s, %.0f s)",
				k.Kernel, k.Registers, k.StackBytes, k.SpillStoreBytes, k.SpillLoadBytes, hit, dt.Seconds())
		}
	}
	return "no resource usage for " + kernels.MegakernelName
}
