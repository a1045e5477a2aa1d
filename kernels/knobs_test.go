package kernels

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestKnobSpaceIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range KnobSpace() {
		if seen[k.Name] || seen[k.Macro] {
			t.Errorf("duplicate knob %s/%s", k.Name, k.Macro)
		}
		seen[k.Name], seen[k.Macro] = true, true
		if !strings.HasPrefix(k.Macro, "AMK_") {
			t.Errorf("%s: macro %s lacks the AMK_ prefix", k.Name, k.Macro)
		}
		if err := k.Check(k.Default); err != nil {
			t.Errorf("default: %v", err)
		}
		if !slices.Contains(k.Choices, k.Default) {
			t.Errorf("%s: default %d not among choices %v", k.Name, k.Default, k.Choices)
		}
		for _, c := range k.Choices {
			if err := k.Check(c); err != nil {
				t.Errorf("choice: %v", err)
			}
		}
		switch k.Scope {
		case ScopeSearch, ScopeConfig, ScopeFixed:
		default:
			t.Errorf("%s: unknown scope %q", k.Name, k.Scope)
		}
	}
	// The schedule package's kernel knobs (the "kernel_knobs" names of docs/spec/ir.md §5) all exist.
	for _, name := range []string{"cols_per_warp", "cpasync", "cpa_stages", "cpa_cols"} {
		if _, ok := LookupKnob(name); !ok {
			t.Errorf("knob %s missing", name)
		}
	}
	// KnobSpace returns copies.
	ks := KnobSpace()
	ks[0].Choices[0] = -5
	if KnobSpace()[0].Choices[0] == -5 {
		t.Error("KnobSpace exposes its internal slices")
	}
}

func TestVariantNormalizeAndDefines(t *testing.T) {
	d, err := DefaultVariant().Defines()
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != len(KnobSpace()) || !slices.IsSorted(d) {
		t.Fatalf("defines not full or not sorted: %v", d)
	}
	if !slices.Contains(d, "-DAMK_THREADS=256") || !slices.Contains(d, "-DAMK_GEMV_CPASYNC=1") {
		t.Errorf("defaults missing: %v", d)
	}
	// An empty variant and the default variant build the same flags (docs/spec/rules.md R8: defaults filled).
	e, _ := Variant{}.Defines()
	if !slices.Equal(d, e) {
		t.Errorf("empty variant flags %v != default %v", e, d)
	}
	v, err := Variant{"cols_per_warp": 4, "AMK_THREADS": 128}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if v["cols_per_warp"] != 4 || v["threads"] != 128 || v.Threads() != 128 || v["cpa_stages"] != 4 {
		t.Errorf("normalize: %v", v)
	}
	if s := (Variant{"b": 2, "a": 1}).String(); s != "a=1,b=2" {
		t.Errorf("String %q", s)
	}
	for _, bad := range []Variant{{"nope": 1}, {"threads": 100}, {"threads": 2048}, {"cpasync": 2}, {"cols_per_warp": 0}} {
		if _, err := bad.Normalize(); err == nil {
			t.Errorf("%v accepted", bad)
		}
		if _, err := bad.Defines(); err == nil {
			t.Errorf("%v rendered", bad)
		}
	}
}

func TestParseDefine(t *testing.T) {
	good := map[string]int64{
		"-DAMK_THREADS=128":            128,
		"-DAMK_GEMV_COLS_PER_WARP=4":   4,
		"-DAMK_WATCHDOG_NS=2000000000": 2_000_000_000,
		"-DAMK_GEMV_CPASYNC=0":         0,
	}
	for flag, want := range good {
		m, v, err := ParseDefine(flag)
		if err != nil || v != want || "-D"+m+"="+strconv.FormatInt(v, 10) != flag {
			t.Errorf("%q: %s %d %v", flag, m, v, err)
		}
	}
	bad := []string{
		"-DFOO;rm -rf /",
		"-DAMK_THREADS=256;rm -rf /",
		"-DAMK_THREADS=256 ",
		" -DAMK_THREADS=256",
		"-D AMK_THREADS=256",
		"-DAMK_THREADS",
		"-DAMK_THREADS=",
		"-DAMK_THREADS=0x100",
		"-DAMK_THREADS=$(id)",
		"-DAMK_THREADS=`id`",
		"-DAMK_THREADS=256\n-DX=1",
		"-DAMK_THREADS=100",    // not a multiple of 32
		"-DAMK_THREADS=2048",   // out of range
		"-DAMK_UNKNOWN_KNOB=1", // not allowed
		"-DAMK_GEMV_MAX_K=1",   // a reference knob amk does not build
		"-Ithreads",
		"--output-file=/etc/passwd",
		"-DAMK_THREADS=99999999999999999999",
		"-DAMK_THRΕADS=256", // Greek capital epsilon
		"",
	}
	for _, flag := range bad {
		if m, v, err := ParseDefine(flag); err == nil {
			t.Errorf("%q accepted as %s=%d", flag, m, v)
		}
	}
	if _, err := VariantFromDefines([]string{"-DAMK_THREADS=128", "-DAMK_THREADS=256"}); err == nil {
		t.Error("duplicate macro accepted")
	}
	v, err := VariantFromDefines([]string{"-DAMK_THREADS=128", "-DAMK_GEMV_CPA_STAGES=2"})
	if err != nil || v["threads"] != 128 || v["cpa_stages"] != 2 {
		t.Errorf("VariantFromDefines: %v %v", v, err)
	}
}

var safeFlag = regexp.MustCompile(`^-DAMK_[A-Z0-9_]+=-?[0-9]+$`)

func FuzzParseDefine(f *testing.F) {
	for _, s := range []string{"-DAMK_THREADS=128", "-DFOO;rm -rf /", "-DAMK_GEMV_KUNROLL=16", "-DAMK_WATCHDOG_NS=1000000", "-D", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, flag string) {
		m, v, err := ParseDefine(flag)
		if err != nil {
			return
		}
		// Anything accepted is canonical, allow-listed, in range and shell-inert.
		if "-D"+m+"="+strconv.FormatInt(v, 10) != flag || !safeFlag.MatchString(flag) {
			t.Fatalf("accepted non-canonical %q", flag)
		}
		k, ok := LookupKnob(m)
		if !ok || k.Check(v) != nil {
			t.Fatalf("accepted %q outside the allow-list", flag)
		}
	})
}
