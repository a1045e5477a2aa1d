package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/kernels/build"
)

func TestDoctorReportsEachCheck(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	none := func() build.NVCC { return build.NVCC{} }
	r := Run(context.Background(), Options{Workspace: ws, FindNVCC: none})
	byName := map[string]Check{}
	for _, c := range r.Checks {
		byName[c.Name] = c
	}
	for name, want := range map[string]string{"amk": OK, "workspace": OK, "nvcc": Warn, "gpu": Warn, "numerics": OK} {
		if got := byName[name].Status; got != want {
			t.Errorf("%s: %s (%s), want %s", name, got, byName[name].Detail, want)
		}
	}
	if !r.Ready || r.GPU || !strings.Contains(r.Text(), "CPU-only") {
		t.Errorf("ready=%v gpu=%v\n%s", r.Ready, r.GPU, r.Text())
	}
	// A GPU probe that fails makes the machine not ready; one that works
	// is reported.
	bad := Run(context.Background(), Options{Workspace: ws, FindNVCC: none,
		GPUProbe: func(context.Context) (string, error) { return "", errors.New("no device") }})
	if bad.Ready || !strings.Contains(bad.Text(), "NOT READY") {
		t.Errorf("failed probe: ready=%v\n%s", bad.Ready, bad.Text())
	}
	nvcc12 := fakeNVCC(t, "12.4")
	good := Run(context.Background(), Options{Workspace: ws, FindNVCC: func() build.NVCC { return build.NVCC{Path: nvcc12, From: "PATH"} },
		GPUProbe: func(context.Context) (string, error) { return "cuda:0 H200", nil }})
	if !good.Ready || !good.GPU || !strings.Contains(good.Text(), "cuda:0 H200") {
		t.Errorf("working probe:\n%s", good.Text())
	}
	// The nvcc line names the compiler, where it came from and its release;
	// an 11.8 is a warning (no sm_90a), one that does not run too.
	for _, tc := range []struct {
		nvcc, status, want string
	}{
		{nvcc12, OK, "release 12.4, from PATH"},
		{fakeNVCC(t, "11.8"), Warn, "not sm_90a"},
		{filepath.Join(t.TempDir(), "missing"), Warn, "does not run"},
	} {
		got := nvccCheck(context.Background(), build.NVCC{Path: tc.nvcc, From: "PATH"})
		if got.Status != tc.status || !strings.Contains(got.Detail, tc.nvcc) || !strings.Contains(got.Detail, tc.want) {
			t.Errorf("nvcc %s: %+v, want %s and %q", tc.nvcc, got, tc.status, tc.want)
		}
	}
	if got := byName["nvcc"].Detail; !strings.Contains(got, "installs Debian's CUDA 12.4 nvcc") {
		t.Errorf("no nvcc: %q does not say how to get one", got)
	}

	// An unwritable workspace fails.
	file := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(file, nil, 0o644)
	if r := Run(context.Background(), Options{Workspace: filepath.Join(file, "ws"), FindNVCC: none}); r.Ready {
		t.Errorf("a workspace under a file passed:\n%s", r.Text())
	}
}

// fakeNVCC is a script that answers --version as nvcc release rel does.
func fakeNVCC(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nvcc")
	script := "#!/bin/sh\necho 'Cuda compilation tools, release " + rel + ", V" + rel + ".1'\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDoctorFindsTheTestsNVCC: without options the doctor reports the nvcc
// that build.FindNVCC (the kernel tests' lookup) finds: here the one `make
// test` installs into a checkout's .cache/cuda-12.4, with nothing on PATH.
func TestDoctorFindsTheTestsNVCC(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module github.com/amk-dev/amk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, ".cache", "cuda-12.4", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fakeNVCC(t, "12.4"), filepath.Join(bin, "nvcc")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	t.Setenv(build.EnvNVCC, "")
	t.Setenv("PATH", t.TempDir())
	found := build.FindNVCC()
	if found.Path != filepath.Join(bin, "nvcc") {
		t.Fatalf("FindNVCC: %+v", found)
	}
	r := Run(context.Background(), Options{Workspace: filepath.Join(t.TempDir(), "ws")})
	for _, c := range r.Checks {
		if c.Name == "nvcc" && (c.Status != OK || !strings.Contains(c.Detail, found.Path) || !strings.Contains(c.Detail, "installed by make test")) {
			t.Errorf("nvcc check %+v, want %s from this checkout", c, found.Path)
		}
	}
}
