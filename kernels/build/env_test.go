package build

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// placeNVCC puts a fakeNVCC that says it is release rel at dir/bin/nvcc
// (dir/nvcc when bin is false) and returns its path.
func placeNVCC(t *testing.T, dir string, bin bool, rel string) string {
	t.Helper()
	if bin {
		dir = filepath.Join(dir, "bin")
	}
	script, _ := fakeNVCC(t, "Cuda compilation tools, release "+rel+", V"+rel+".131", 0, false)
	data, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "nvcc")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFindNVCC: $AMK_NVCC first, then the checkout's own toolkits (12.4
// before 11.8), then PATH; a toolkit in the user's cache directory, where
// scripts/gpu/debian-cuda.sh puts one by default, is never used (whether
// the kernel tests run must not depend on it).
func TestFindNVCC(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("// amk\nmodule github.com/amk-dev/amk\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "kernels", "build")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	userCache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", userCache)
	t.Setenv("HOME", userCache)
	placeNVCC(t, filepath.Join(userCache, "amk", "cuda-11.8"), true, "11.8")
	t.Setenv(EnvNVCC, "")
	t.Setenv("AMK_CUDA_DEBIAN", filepath.Join(userCache, "amk", "cuda-11.8"))
	t.Setenv("PATH", t.TempDir())

	if got := FindNVCC(); got != (NVCC{}) {
		t.Fatalf("with no nvcc but the user cache's: %+v (the user cache must not count)", got)
	}
	onPath := placeNVCC(t, t.TempDir(), false, "13.0")
	t.Setenv("PATH", filepath.Dir(onPath))
	if got := FindNVCC(); got.Path != onPath || got.From != "PATH" {
		t.Fatalf("PATH: %+v", got)
	}
	old := placeNVCC(t, filepath.Join(root, ".cache", "cuda-11.8"), true, "11.8")
	if got := FindNVCC(); got.Path != old || !strings.Contains(got.From, ".cache/cuda-11.8") {
		t.Fatalf("the checkout's 11.8: %+v", got)
	}
	cur := placeNVCC(t, filepath.Join(root, ".cache", "cuda-12.4"), true, "12.4")
	got := FindNVCC()
	if got.Path != cur || !strings.Contains(got.From, "make test") {
		t.Fatalf("the checkout's 12.4: %+v", got)
	}
	if rel := ToolkitRelease(context.Background(), Toolchain{NVCC: got.Path}); rel != "12.4" {
		t.Fatalf("ToolkitRelease of the checkout's nvcc: %q", rel)
	}
	t.Setenv(EnvNVCC, " /opt/cuda/bin/nvcc ")
	if got := FindNVCC(); got.Path != "/opt/cuda/bin/nvcc" || got.From != "$AMK_NVCC" {
		t.Fatalf("AMK_NVCC: %+v", got)
	}

	// Outside an amk checkout (another module), the toolkits under .cache
	// are not this checkout's: PATH again.
	t.Setenv(EnvNVCC, "")
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	placeNVCC(t, filepath.Join(other, ".cache", "cuda-12.4"), true, "12.4")
	t.Chdir(other)
	if got := FindNVCC(); got.Path != onPath {
		t.Fatalf("in another module: %+v", got)
	}
}

func TestCheckoutRootAndRelease(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := CheckoutRoot(wd)
	if root == "" || filepath.Join(root, "kernels", "build") != wd {
		t.Fatalf("CheckoutRoot(%s) = %q", wd, root)
	}
	if CheckoutRoot(string(filepath.Separator)) != "" {
		t.Fatal("the file system root is not a checkout")
	}
	for in, want := range map[string]string{
		"nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 11.8, V11.8.89\nBuild cuda_11.8": "11.8",
		"Cuda compilation tools, release 13.0, V13.0.48":                                                         "13.0",
		"no release here": "",
	} {
		if got := parseRelease(in); got != want {
			t.Errorf("parseRelease(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ToolkitRelease(context.Background(), Toolchain{NVCC: filepath.Join(t.TempDir(), "missing")}); got != "" {
		t.Fatalf("a missing nvcc gave %q", got)
	}
}

func TestCompilesSM90a(t *testing.T) {
	for rel, want := range map[string]bool{"12.4": true, "13.0": true, "11.8": false, "9.2": false, "": false, "x.y": false} {
		if CompilesSM90a(rel) != want {
			t.Errorf("CompilesSM90a(%q) = %v", rel, !want)
		}
	}
}
