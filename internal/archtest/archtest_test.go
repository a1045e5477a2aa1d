// Package archtest holds the architecture rules of docs/architecture.md as
// tests: every package imports only what its row of the may-import table
// allows (and has a row), and the pure packages (IR, validator, models,
// lowering, VM, campaign, flywheel, ...) never depend, even indirectly, on
// Redis, viper, Prometheus, cgo, os/exec or net/http.
package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

var purePackages = []string{"pyjson", "chart", "ir", "ir/mpk", "validate", "tensor", "model", "schedule", "vm", "campaign", "flywheel", "trial", "dispatch", "runner", "pipeline", "fib", "baseline", "control", "control/controltest", "inputfile", "programfile", "ir/mpk/rank", "atomicfile", "filemap", "didyoumean"}

var forbidden = []string{
	"github.com/redis/", "github.com/hibiken/asynq", "github.com/spf13/viper", "github.com/prometheus/",
	"gorgonia.org/cu", "runtime/cgo", "os/exec", "net/http",
}

func TestPurePackagesStayPure(t *testing.T) {
	for _, pkg := range purePackages {
		for _, v := range violations(t, pkg) {
			t.Error(v)
		}
	}
}

// The rule can fail: the Redis transport breaks it.
func TestTheRuleDetectsAnImpurePackage(t *testing.T) {
	if len(violations(t, "internal/redisq")) == 0 {
		t.Fatal("internal/redisq reported pure")
	}
}

func violations(t *testing.T, pkg string) (bad []string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,CgoFiles", "github.com/amk-dev/amk/"+pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			CgoFiles   []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		for _, f := range forbidden {
			if strings.HasPrefix(p.ImportPath, f) {
				bad = append(bad, pkg+" depends on "+p.ImportPath)
			}
		}
		if len(p.CgoFiles) > 0 && strings.HasPrefix(p.ImportPath, "github.com/amk-dev/amk/") {
			bad = append(bad, pkg+" depends on the cgo package "+p.ImportPath)
		}
	}
	return bad
}
