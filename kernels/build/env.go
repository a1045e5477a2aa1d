package build

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables of the operator's CUDA toolchain configuration, read
// by every verb, daemon and GPU test that compiles kernels.
const (
	EnvNVCC     = "AMK_NVCC"           // nvcc executable (default: nvcc on PATH)
	EnvNVCCArgs = "AMK_NVCC_HOST_ARGS" // extra trusted nvcc arguments, space-separated (e.g. "-ccbin g++-12")
	EnvCache    = "AMK_KERNEL_CACHE"   // the host's shared build cache (default: the user cache dir + amk/kernels)
)

// ToolchainFromEnv reads the nvcc configuration from the environment.
func ToolchainFromEnv() Toolchain {
	tc := Toolchain{NVCC: strings.TrimSpace(os.Getenv(EnvNVCC)), HostArgs: strings.Fields(os.Getenv(EnvNVCCArgs))}
	if tc.NVCC == "" {
		tc.NVCC = "nvcc"
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
