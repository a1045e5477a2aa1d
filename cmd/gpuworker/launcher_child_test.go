package main

import (
	"testing"

	"github.com/amk-dev/amk/kernels/launch"
)

func TestLauncherChildWithoutCUDA(t *testing.T) {
	if launch.CUDAEnabled {
		t.Skip("cuda build: the child would open a device")
	}
	if code := runLauncherChild([]string{"--device", "0", "--cache", t.TempDir()}); code != 2 {
		t.Fatalf("launcher-child in a build without CUDA: exit %d, want 2", code)
	}
	if code := runLauncherChild([]string{"--device", "0"}); code != 2 {
		t.Fatalf("launcher-child without --cache: exit %d, want 2", code)
	}
}
