package build

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Environment variables of the operator's CUDA toolchain configuration, read
// by every verb, daemon and GPU test that compiles kernels.
const (
	EnvNVCC     = "AMK_NVCC"           // nvcc executable (default: nvcc on PATH)
	EnvNVCCArgs = "AMK_NVCC_HOST_ARGS" // extra trusted nvcc arguments, space-separated (e.g. "-ccbin g++-12")
	EnvCache    = "AMK_KERNEL_CACHE"   // the host's shared build cache (default: the user cache dir + amk/kernels)
	EnvCXX      = "AMK_CXX"            // the CPU emulator's C++ compiler (default: g++ on PATH)
	EnvCXXArgs  = "AMK_CXX_ARGS"       // extra trusted arguments for it, space-separated
	EnvEmuOpt   = "AMK_EMU_OPT"        // the emulator kernel's optimisation level (default EmulatorKernelOpt)
)

// ToolchainFromEnv reads the nvcc and the emulator's C++ compiler
// configuration from the environment.
func ToolchainFromEnv() Toolchain {
	tc := Toolchain{NVCC: strings.TrimSpace(os.Getenv(EnvNVCC)), HostArgs: strings.Fields(os.Getenv(EnvNVCCArgs)),
		CXX: strings.TrimSpace(os.Getenv(EnvCXX)), CXXArgs: strings.Fields(os.Getenv(EnvCXXArgs)),
		EmulatorOpt: strings.TrimSpace(os.Getenv(EnvEmuOpt))}
	if tc.NVCC == "" {
		tc.NVCC = "nvcc"
	}
	if tc.CXX == "" {
		tc.CXX = "g++"
	}
	return tc
}

// CacheDirFromEnv is the shared build cache directory: $AMK_KERNEL_CACHE, or
// amk/kernels under the user cache directory.
func CacheDirFromEnv() (string, error) {
	if d := strings.TrimSpace(os.Getenv(EnvCache)); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no kernel cache directory: set %s (%v)", EnvCache, err)
	}
	return filepath.Join(base, "amk", "kernels"), nil
}

// FindNVCC is the nvcc the kernels' nvcc checks use (tests that compile device
// or host code and skip without one): $AMK_NVCC, else the Debian CUDA 11.8
// toolkit that scripts/gpu/debian-cuda.sh --nvcc unpacks under the user cache
// directory ($AMK_CUDA_DEBIAN overrides where), else nvcc on PATH; "" when
// there is none.
func FindNVCC() string {
	if n := strings.TrimSpace(os.Getenv(EnvNVCC)); n != "" {
		return n
	}
	dir := os.Getenv("AMK_CUDA_DEBIAN")
	if dir == "" {
		if base, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(base, "amk", "cuda-11.8")
		}
	}
	if dir != "" {
		if st, err := os.Stat(filepath.Join(dir, "bin", "nvcc")); err == nil && st.Mode()&0o111 != 0 {
			return filepath.Join(dir, "bin", "nvcc")
		}
	}
	if p, err := exec.LookPath("nvcc"); err == nil {
		return p
	}
	return ""
}
