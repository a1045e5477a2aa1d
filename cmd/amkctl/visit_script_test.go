package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGPUVisitScripts keeps scripts/gpu/ parseable without a GPU: every
// shell script passes bash -n, and the visit script refuses a wrong phase
// or time. (TestDeviceEmu runs the visit itself, tinyVisit.)
func TestGPUVisitScripts(t *testing.T) {
	needVisitTools(t)
	scripts, _ := filepath.Glob(filepath.Join(repoRoot(), "scripts", "gpu", "*.sh"))
	if len(scripts) == 0 {
		t.Fatal("no scripts/gpu/*.sh")
	}
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", s, err, out)
		}
	}
	visit := filepath.Join(repoRoot(), "scripts", "gpu", "visit.sh")
	if out, err := exec.Command(visit, "C").CombinedOutput(); err == nil || !strings.Contains(string(out), "want phase A or B") {
		t.Errorf("phase C: %v\n%s", err, out)
	}
	cmd := exec.Command(visit, "B")
	cmd.Env = append(os.Environ(), "VISIT_SECONDS=20")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "want at least 60") {
		t.Errorf("VISIT_SECONDS=20: %v\n%s", err, out)
	}
}

func needVisitTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bash", "tar", "timeout", "flock", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
}

func repoRoot() string {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	return root
}

// tinyVisit runs scripts/gpu/visit.sh in its tiny rehearsal mode (the CPU
// emulator standing in for the GPU; env, one toy eval, the packing) with the
// caller's kernel cache: the archive in $OUT has a step table and a summary
// that say what ran, what was skipped for want of a GPU, and the device
// check's error as a share of the tolerance; the output ends with them.
func tinyVisit(t *testing.T) {
	needVisitTools(t)
	visit := filepath.Join(repoRoot(), "scripts", "gpu", "visit.sh")
	// amkctl is this test binary run as the command (TestMain).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, out, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	wrapper := "#!/bin/sh\nAMKCTL_AS_MAIN=1 exec '" + exe + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "amkctl"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(visit, "A")
	cmd.Env = append(os.Environ(), "VISIT_TINY=1", "AMK_VISIT_DEVICE=emu", "BIN="+bin, "OUT="+out, "TMPDIR="+tmp,
		"AMK_KERNEL_PREBUILT="+filepath.Join(tmp, "prebuilt"), "TARGET=h100", "AMK_NVCC=", "VISIT_EMU_POS=4")
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("visit.sh A (tiny, emu): %v\n%s", err, log)
	}
	files := untarGz(t, filepath.Join(out, "visit-A.tar.gz"))
	steps, summary := files["visit-A/steps.tsv"], files["visit-A/summary.txt"]
	for _, want := range []string{"env\t0\t", "copy-bw\t-\t0\t", "skipped: no GPU", "eval-toy-4\t0\t"} {
		if !strings.Contains(steps, want) {
			t.Errorf("steps.tsv lacks %q:\n%s\n%s", want, steps, log)
		}
	}
	for _, want := range []string{"toy-4: PASS, error ", "% of the tolerance, top-1 1.0000", "predicted"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, summary)
		}
	}
	if !strings.Contains(string(log), "eval-toy-4") || !strings.Contains(string(log), "toy-4: PASS") {
		t.Errorf("the output's end lacks the step table and the summary:\n%s", log)
	}
}

// untarGz reads a .tar.gz into a map of file name to content.
func untarGz(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(z)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(io.LimitReader(tr, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(data)
	}
}
