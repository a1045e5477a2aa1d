package build

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestToolchainAndCacheFromEnv(t *testing.T) {
	t.Setenv(EnvNVCC, "")
	t.Setenv(EnvNVCCArgs, "")
	if tc := ToolchainFromEnv(); tc.NVCC != "nvcc" || len(tc.HostArgs) != 0 {
		t.Fatalf("default toolchain %+v", tc)
	}
	t.Setenv(EnvNVCC, "/usr/local/cuda/bin/nvcc")
	t.Setenv(EnvNVCCArgs, " -ccbin  g++-12 ")
	if tc := ToolchainFromEnv(); tc.NVCC != "/usr/local/cuda/bin/nvcc" || !slices.Equal(tc.HostArgs, []string{"-ccbin", "g++-12"}) {
		t.Fatalf("toolchain %+v", tc)
	}
	dir := filepath.Join(t.TempDir(), "k")
	t.Setenv(EnvCache, dir)
	if got, err := CacheDirFromEnv(); err != nil || got != dir {
		t.Fatalf("cache %q %v", got, err)
	}
}
