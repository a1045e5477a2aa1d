package build

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestToolchainAndCacheFromEnv(t *testing.T) {
	t.Setenv(EnvNVCC, "")
	t.Setenv(EnvNVCCArgs, "")
	t.Setenv(EnvCXX, "")
	t.Setenv(EnvCXXArgs, "")
	t.Setenv(EnvEmuOpt, "")
	if tc := ToolchainFromEnv(); tc.NVCC != "nvcc" || len(tc.HostArgs) != 0 || tc.CXX != "g++" || len(tc.CXXArgs) != 0 || tc.EmulatorOpt != "" {
		t.Fatalf("default toolchain %+v", tc)
	}
	t.Setenv(EnvCXX, " clang++ ")
	t.Setenv(EnvCXXArgs, "-stdlib=libc++")
	t.Setenv(EnvEmuOpt, "-O0")
	if tc := ToolchainFromEnv(); tc.CXX != "clang++" || !slices.Equal(tc.CXXArgs, []string{"-stdlib=libc++"}) || tc.EmulatorOpt != "-O0" {
		t.Fatalf("emulator toolchain %+v", tc)
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
