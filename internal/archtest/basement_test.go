package archtest

import (
	"strings"
	"testing"
)

// topFloor are the packages that may import internal/: the binaries, the
// basement itself, and the deployment's own test harness, which starts the
// binaries and talks to their parts.
var topFloor = []string{"cmd/", "internal/", "deploy/deploytest"}

// basementViolations lists the imports of internal/ by packages outside the
// top floor (non-test files only, as for the table).
func basementViolations(pkgs []pkgImports) (bad []string) {
	for _, p := range pkgs {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if onTopFloor(name) {
			continue
		}
		for _, imp := range p.Imports {
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok && strings.HasPrefix(dep, "internal/") {
				bad = append(bad, name+" imports "+dep+": only cmd/ and internal/ may import internal/")
			}
		}
	}
	return bad
}

func onTopFloor(pkg string) bool {
	for _, top := range topFloor {
		if pkg == strings.TrimSuffix(top, "/") || strings.HasPrefix(pkg, top) {
			return true
		}
	}
	return false
}

// internal/ is the basement of the binaries: the lower floors (the core,
// control/) never reach into it.
func TestNothingBelowTheTopImportsInternal(t *testing.T) {
	for _, v := range basementViolations(listPackages(t)) {
		t.Error(v)
	}
}

// The rule can fail: a core package importing internal/ is named.
func TestTheBasementRuleDetectsAViolation(t *testing.T) {
	pkgs := []pkgImports{
		{ImportPath: module + "/trial", Imports: []string{module + "/ir", module + "/internal/version"}},
		{ImportPath: module + "/cmd/amkctl", Imports: []string{module + "/internal/version"}},
		{ImportPath: module + "/internal/api", Imports: []string{module + "/internal/metrics"}},
	}
	bad := basementViolations(pkgs)
	if len(bad) != 1 || !strings.Contains(bad[0], "trial imports internal/version") {
		t.Fatalf("violations %q, want one for trial", bad)
	}
}
