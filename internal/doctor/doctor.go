package doctor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/trial"
)

// Check statuses.
const (
	OK   = "OK"
	Warn = "WARN"
	Fail = "FAIL"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// Report is the doctor's answer.
type Report struct {
	Checks []Check `json:"checks"`
	// Ready is false when any check failed; GPU says whether this binary
	// can evaluate on a GPU here.
	Ready bool `json:"ready"`
	GPU   bool `json:"gpu"`
}

// Options configures Run.
type Options struct {
	// Workspace is the directory checked for writing and free space.
	Workspace string
	// GPUProbe opens the GPU launcher and names the device; nil means this
	// binary was built without CUDA support.
	GPUProbe func(ctx context.Context) (string, error)
	// FindNVCC finds the nvcc to report (build.FindNVCC when nil: the one
	// lookup the kernel tests use too).
	FindNVCC func() build.NVCC
}

// minFreeBytes is the free space below which the workspace check warns.
const minFreeBytes = 1 << 30

// Run performs every check, each bounded in time by ctx.
func Run(ctx context.Context, o Options) Report {
	if o.FindNVCC == nil {
		o.FindNVCC = build.FindNVCC
	}
	var r Report
	add := func(name, status, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, Status: status, Detail: fmt.Sprintf(format, args...)})
	}
	add("amk", OK, "build %s, %s, %s/%s", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	add("cpus", OK, "%d", runtime.NumCPU())
	if avail, total, ok := memInfo(); ok {
		status := OK
		if avail < 2<<30 {
			status = Warn
		}
		add("memory", status, "%.1f GiB available of %.1f GiB (the CPU check of a large model holds up to %.0f GiB of weights at their stored dtype)", gib(avail), gib(total), gib(uint64(trial.DefaultCheckBytes)))
	} else {
		add("memory", Warn, "unknown (no /proc/meminfo)")
	}
	r.Checks = append(r.Checks, workspaceCheck(o.Workspace))
	add("targets", OK, "%d GPU target records: %s", len(ir.TargetNames()), strings.Join(ir.TargetNames(), ", "))

	r.Checks = append(r.Checks, nvccCheck(ctx, o.FindNVCC()))
	switch {
	case o.GPUProbe == nil:
		add("gpu", Warn, "this binary has no CUDA support (build with -tags cuda); trials run on the CPU, latencies are predicted")
	default:
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		name, err := o.GPUProbe(pctx)
		cancel()
		if err != nil {
			add("gpu", Fail, "the CUDA launcher did not open: %v", err)
		} else {
			r.GPU = true
			add("gpu", OK, "%s", name)
		}
	}
	r.Checks = append(r.Checks, numericsCheck(ctx))
	r.Ready = true
	for _, c := range r.Checks {
		if c.Status == Fail {
			r.Ready = false
		}
	}
	return r
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }

// memInfo reads MemAvailable and MemTotal from /proc/meminfo.
func memInfo() (avail, total uint64, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemAvailable:":
			avail = kb << 10
		case "MemTotal:":
			total = kb << 10
		}
	}
	return avail, total, avail > 0 && total > 0
}

// workspaceCheck creates the workspace if needed, writes and removes a
// probe file, and reports the free space.
func workspaceCheck(dir string) Check {
	c := Check{Name: "workspace", Status: OK}
	if dir == "" {
		c.Status, c.Detail = Warn, "no workspace given"
		return c
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.Status, c.Detail = Fail, err.Error()
		return c
	}
	probe, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		c.Status, c.Detail = Fail, fmt.Sprintf("%s is not writable: %v", dir, err)
		return c
	}
	probe.Close()
	os.Remove(probe.Name())
	abs, _ := filepath.Abs(dir)
	if free, ok := freeBytes(dir); ok {
		c.Detail = fmt.Sprintf("%s writable, %.1f GiB free", abs, gib(free))
		if free < minFreeBytes {
			c.Status = Warn
			c.Detail += " (less than 1 GiB: ledgers and reports may not fit)"
		}
		return c
	}
	c.Detail = abs + " writable"
	return c
}

// nvccCheck reports the nvcc that the kernel builds and tests would use,
// where it was found and its release.
func nvccCheck(ctx context.Context, n build.NVCC) Check {
	c := Check{Name: "nvcc", Status: Warn}
	if n.Path == "" {
		c.Detail = "not found, so the CUDA kernels cannot be built here: " + build.NoNVCCHint
		return c
	}
	tc := build.ToolchainFromEnv()
	tc.NVCC = n.Path
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	release := build.ToolkitRelease(vctx, tc)
	cancel()
	switch {
	case release == "":
		c.Detail = fmt.Sprintf("%s (from %s) does not run or does not print its release", n.Path, n.From)
	case !build.CompilesSM90a(release):
		c.Detail = fmt.Sprintf("%s (release %s, from %s): compiles sm_90 but not sm_90a, so not the streaming ring's TMA path", n.Path, release, n.From)
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s (release %s, from %s)", n.Path, release, n.From)
	}
	return c
}

// numericsCheck evaluates the canonical default schedule on the toy model:
// lowering, validation, the reference VM against the eager oracle.
func numericsCheck(ctx context.Context) Check {
	c := Check{Name: "numerics"}
	spec := trial.Spec{Model: "toy", GPU: "h100", Device: "cpu", Token: trial.DefaultToken}
	out := trial.Evaluate(ctx, spec, trial.Options{})
	v := out.Verdict
	switch {
	case out.Failure != nil:
		c.Status, c.Detail = Fail, fmt.Sprintf("%s during %s: %s", out.Failure.Class, out.Failure.Phase, out.Failure.Message)
	case v == nil || !v.Valid || v.Correct == nil || !*v.Correct:
		c.Status, c.Detail = Fail, fmt.Sprintf("the toy model's default schedule did not pass: %+v", v)
	default:
		c.Status = OK
		c.Detail = "toy default schedule: validated, reference VM matches the eager oracle"
		if v.MaxAbsErr != nil {
			c.Detail += fmt.Sprintf(" (max_abs_err %.3g)", *v.MaxAbsErr)
		}
	}
	return c
}

// Text renders the report like the reference's doctor.
func (r Report) Text() string {
	var b strings.Builder
	b.WriteString("amk doctor\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "  %-10s %-4s %s\n", c.Name, c.Status, c.Detail)
	}
	switch {
	case !r.Ready:
		b.WriteString("  status     NOT READY: fix the FAIL lines above\n")
	case r.GPU:
		b.WriteString("  status     ready (GPU trials measured on the device)\n")
	default:
		b.WriteString("  status     CPU-only: the reference VM and the cost model work; GPU trials need a cuda build and nvcc\n")
	}
	return b.String()
}
