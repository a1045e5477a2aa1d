package archtest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/amk-dev/amk"

// mayImport is docs/architecture.md's table: a package (or "dir/*") and
// the amk packages it may import directly; nil means anything.
type mayImport map[string][]string

var (
	rowRe  = regexp.MustCompile("^\\| `([^`]+)` \\|.*\\| ([^|]+) \\|$")
	nameRe = regexp.MustCompile("`([^`]+)`")
)

// readTable parses the table of docs/architecture.md.
func readTable(t *testing.T) mayImport {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table := mayImport{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := rowRe.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		cell := strings.TrimSpace(m[2])
		switch {
		case cell == "anything":
			table[m[1]] = nil
		case cell == "—":
			table[m[1]] = []string{}
		default:
			for _, n := range nameRe.FindAllStringSubmatch(cell, -1) {
				table[m[1]] = append(table[m[1]], n[1])
			}
		}
	}
	if len(table) < 10 {
		t.Fatalf("docs/architecture.md: only %d table rows found", len(table))
	}
	return table
}

// rule finds a package's row: its own, or the "dir/*" row of a parent.
func (m mayImport) rule(pkg string) (allowed []string, ok bool) {
	if a, ok := m[pkg]; ok {
		return a, true
	}
	for p := pkg; strings.Contains(p, "/"); {
		p = p[:strings.LastIndex(p, "/")]
		if a, ok := m[p+"/*"]; ok {
			return a, true
		}
	}
	return nil, false
}

type pkgImports struct {
	ImportPath string
	Imports    []string
}

// listPackages is every package of the module with its direct imports
// (non-test files).
func listPackages(t *testing.T) []pkgImports {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkgImports
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkgImports
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// check lists the table's violations: packages without a row, imports a
// row does not allow.
func (m mayImport) check(pkgs []pkgImports) (bad []string) {
	for _, p := range pkgs {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		allowed, ok := m.rule(name)
		if !ok {
			bad = append(bad, name+": no row in docs/architecture.md's table")
			continue
		}
		if allowed == nil {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			if !slices.Contains(allowed, dep) {
				bad = append(bad, name+" imports "+dep+", which its row does not allow")
			}
		}
	}
	return bad
}

func TestImportsFollowTheTable(t *testing.T) {
	table := readTable(t)
	for _, v := range table.check(listPackages(t)) {
		t.Error(v)
	}
}

// The rule can fail: drop an allowed import, or a row, and it says so.
func TestTheTableDetectsAViolation(t *testing.T) {
	table := readTable(t)
	pkgs := listPackages(t)
	table["ir"] = []string{}
	delete(table, "chart")
	bad := strings.Join(table.check(pkgs), "\n")
	for _, want := range []string{"ir imports pyjson", "chart: no row"} {
		if !strings.Contains(bad, want) {
			t.Errorf("the check missed %q; it said:\n%s", want, bad)
		}
	}
}
