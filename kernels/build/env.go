package build

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// CheckoutToolkits are where `make test` (`make nvcc`, scripts/ensure-nvcc.sh) installs
// Debian's CUDA compilers, relative to the root of an amk checkout, in the
// order FindNVCC prefers them: nvcc 12.4 (compiles sm_90a, the streaming
// ring's TMA path included), then nvcc 11.8 (sm_90 only), which make test
// installs only when 12.4 cannot be fetched.
var CheckoutToolkits = []struct{ Dir, Release string }{
	{".cache/cuda-12.4", "12.4"},
	{".cache/cuda-11.8", "11.8"},
}

// NVCC is an nvcc executable and how FindNVCC found it.
type NVCC struct {
	Path string // "" when there is none
	// From says where it came from, in words a user can act on.
	From string
}

// FindNVCC is the one lookup of an nvcc, used by `amkctl doctor` and by the
// tests that compile device or host code (they skip without one): $AMK_NVCC;
// else, inside an amk checkout, the compiler `make test` installed into it
// (CheckoutToolkits); else nvcc on PATH. Nothing else, so that whether those
// tests run depends on the checkout and the environment, never on a user's
// cache. Path is "" when there is none.
func FindNVCC() NVCC {
	if n := strings.TrimSpace(os.Getenv(EnvNVCC)); n != "" {
		return NVCC{Path: n, From: "$" + EnvNVCC}
	}
	if wd, err := os.Getwd(); err == nil {
		if root := CheckoutRoot(wd); root != "" {
			for _, tk := range CheckoutToolkits {
				nvcc := filepath.Join(root, filepath.FromSlash(tk.Dir), "bin", "nvcc")
				if st, err := os.Stat(nvcc); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
					return NVCC{Path: nvcc,
						From: "this checkout's " + tk.Dir + " (Debian's CUDA " + tk.Release + ", installed by make test)"}
				}
			}
		}
	}
	if p, err := exec.LookPath("nvcc"); err == nil {
		return NVCC{Path: p, From: "PATH"}
	}
	return NVCC{}
}

// NoNVCCHint is what to do when FindNVCC finds nothing.
const NoNVCCHint = "make test (make nvcc) installs Debian's CUDA 12.4 nvcc into this checkout's .cache/cuda-12.4; when it cannot, it says why (.cache/cuda-install.log). Or set " + EnvNVCC + " or put nvcc on PATH"

// modulePath is the module an amk checkout's go.mod declares.
const modulePath = "github.com/amk-dev/amk"

// CheckoutRoot is the root of the amk checkout that holds dir (the nearest
// directory at or above it whose go.mod declares amk's module), or "".
func CheckoutRoot(dir string) string {
	for d := filepath.Clean(dir); ; {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			for line := range strings.SplitSeq(string(data), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
					if strings.Trim(f[1], `"`) == modulePath {
						return d
					}
					break
				}
			}
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

// ToolkitRelease is the "release X.Y" of `nvcc --version` ("" when nvcc
// cannot tell), for worker fingerprints and the doctor.
func ToolkitRelease(ctx context.Context, tc Toolchain) string {
	out, err := (&Builder{Toolchain: tc}).ToolchainVersion(ctx)
	if err != nil {
		return ""
	}
	return parseRelease(out)
}

// CompilesSM90a says whether an nvcc of this release ("12.4") compiles the
// arch-specific sm_90a, which the streaming ring's TMA path needs: release 12
// or newer.
func CompilesSM90a(release string) bool {
	major, _, _ := strings.Cut(release, ".")
	v, err := strconv.Atoi(major)
	return err == nil && v >= 12
}

// parseRelease is the X.Y of the "release X.Y," that `nvcc --version`
// prints, or "".
func parseRelease(version string) string {
	if m := reRelease.FindStringSubmatch(version); m != nil {
		return m[1]
	}
	return ""
}

var reRelease = regexp.MustCompile(`\brelease ([0-9]+\.[0-9]+),`)
