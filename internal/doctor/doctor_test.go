package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDoctorReportsEachCheck(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	none := func(string) (string, error) { return "", errors.New("not found") }
	r := Run(context.Background(), Options{Workspace: ws, LookPath: none})
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
	bad := Run(context.Background(), Options{Workspace: ws, LookPath: none,
		GPUProbe: func(context.Context) (string, error) { return "", errors.New("no device") }})
	if bad.Ready || !strings.Contains(bad.Text(), "NOT READY") {
		t.Errorf("failed probe: ready=%v\n%s", bad.Ready, bad.Text())
	}
	good := Run(context.Background(), Options{Workspace: ws, LookPath: func(string) (string, error) { return "/usr/bin/nvcc", nil },
		GPUProbe: func(context.Context) (string, error) { return "cuda:0 H200", nil }})
	if !good.Ready || !good.GPU || !strings.Contains(good.Text(), "cuda:0 H200") {
		t.Errorf("working probe:\n%s", good.Text())
	}
	// An unwritable workspace fails.
	file := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(file, nil, 0o644)
	if r := Run(context.Background(), Options{Workspace: filepath.Join(file, "ws"), LookPath: none}); r.Ready {
		t.Errorf("a workspace under a file passed:\n%s", r.Text())
	}
}
