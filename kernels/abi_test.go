package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

// header is what abi_test extracts from abi.h.
type header struct {
	defines map[string]int64
	enums   map[string]map[string]int64 // typedef name -> enumerator -> value
	order   map[string][]string         // typedef name -> enumerators in order
	structs map[string][]string         // typedef name -> field names in order
	pins    map[string]int              // static-assert expression -> value
}

var (
	reBlockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	reLineComment  = regexp.MustCompile(`//[^\n]*`)
	reDefine       = regexp.MustCompile(`(?m)^#define\s+(AMK_[A-Z0-9_]+)\s+(0x[0-9A-Fa-f]+|-?[0-9]+)\s*$`)
	reEnum         = regexp.MustCompile(`(?s)typedef\s+enum\s*\{(.*?)\}\s*([a-z_0-9]+)\s*;`)
	reStruct       = regexp.MustCompile(`(?s)typedef\s+struct\s*\{(.*?)\}\s*([a-z_0-9]+)\s*;`)
	reField        = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*(?:\s*\*)?(?:\s+const)?\s*\**\s*(.+)$`)
	reAssert       = regexp.MustCompile(`AMK_STATIC_ASSERT\(\s*(.+?)\s*==\s*([0-9]+)\s*,`)
)

func parseHeader(t *testing.T, src string) header {
	t.Helper()
	src = reBlockComment.ReplaceAllString(src, "")
	src = reLineComment.ReplaceAllString(src, "")
	h := header{defines: map[string]int64{}, enums: map[string]map[string]int64{},
		order: map[string][]string{}, structs: map[string][]string{}, pins: map[string]int{}}
	for _, m := range reDefine.FindAllStringSubmatch(src, -1) {
		v, err := strconv.ParseInt(m[2], 0, 64)
		if err != nil {
			t.Fatalf("define %s: %v", m[1], err)
		}
		h.defines[m[1]] = v
	}
	for _, m := range reEnum.FindAllStringSubmatch(src, -1) {
		vals := map[string]int64{}
		next := int64(0)
		for item := range strings.SplitSeq(m[1], ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			name, val, explicit := strings.Cut(item, "=")
			name = strings.TrimSpace(name)
			v := next
			if explicit {
				x, err := strconv.ParseInt(strings.TrimSpace(val), 0, 64)
				if err != nil {
					t.Fatalf("enum %s: %s: %v", m[2], item, err)
				}
				v = x
			}
			vals[name] = v
			h.order[m[2]] = append(h.order[m[2]], name)
			next = v + 1
		}
		h.enums[m[2]] = vals
	}
	for _, m := range reStruct.FindAllStringSubmatch(src, -1) {
		var fields []string
		for decl := range strings.SplitSeq(m[1], ";") {
			decl = strings.TrimSpace(decl)
			if decl == "" {
				continue
			}
			fm := reField.FindStringSubmatch(decl)
			if fm == nil {
				t.Fatalf("struct %s: cannot parse %q", m[2], decl)
			}
			for name := range strings.SplitSeq(fm[1], ",") {
				name = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(name), "*"))
				if i := strings.IndexByte(name, '['); i >= 0 {
					name = name[:i]
				}
				fields = append(fields, name)
			}
		}
		h.structs[m[2]] = fields
	}
	for _, m := range reAssert.FindAllStringSubmatch(src, -1) {
		v, _ := strconv.Atoi(m[2])
		h.pins[m[1]] = v
	}
	return h
}

func loadHeader(t *testing.T) header {
	t.Helper()
	src, err := os.ReadFile("abi.h")
	if err != nil {
		t.Fatal(err)
	}
	return parseHeader(t, string(src))
}

func TestHeaderVersionAndCaps(t *testing.T) {
	h := loadHeader(t)
	major, minor, ok := strings.Cut(ir.ABIVersion, ".")
	if !ok {
		t.Fatalf("ir.ABIVersion %q has no minor", ir.ABIVersion)
	}
	want := map[string]string{
		"AMK_ABI_VERSION_MAJOR":   major,
		"AMK_ABI_VERSION_MINOR":   minor,
		"AMK_MAX_INPUTS":          strconv.Itoa(ir.MaxInputs),
		"AMK_MAX_OUTPUTS":         strconv.Itoa(ir.MaxOutputs),
		"AMK_MAX_WAITS":           strconv.Itoa(ir.MaxWaits),
		"AMK_MAX_RANK":            strconv.Itoa(ir.MaxRank),
		"AMK_FLAG_CAUSAL":         strconv.Itoa(ir.FlagCausal),
		"AMK_FLAG_PARTIAL_WRITE":  strconv.Itoa(ir.FlagPartialWrite),
		"AMK_FLAG_PAIRED_TILE":    strconv.Itoa(ir.FlagPairedTile),
		"AMK_FUSED_PATTERN_SHIFT": strconv.Itoa(ir.FusedPatternShift),
	}
	for name, w := range want {
		got, ok := h.defines[name]
		if !ok {
			t.Errorf("abi.h lacks #define %s", name)
			continue
		}
		if strconv.FormatInt(got, 10) != w {
			t.Errorf("%s = %d, ir says %s", name, got, w)
		}
	}
}

// checkEnum compares a header enum with the canonical names and codes.
func checkEnum(t *testing.T, h header, typedef string, want map[string]int64) {
	t.Helper()
	got, ok := h.enums[typedef]
	if !ok {
		t.Fatalf("abi.h lacks enum %s", typedef)
	}
	for name, code := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s lacks %s (= %d)", typedef, name, code)
		} else if g != code {
			t.Errorf("%s: %s = %d, canonical %d", typedef, name, g, code)
		}
	}
	for name, code := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s has %s = %d that the Go side does not know", typedef, name, code)
		}
	}
}

func TestHeaderEnumsMatchIR(t *testing.T) {
	h := loadHeader(t)
	dt := map[string]int64{}
	for _, d := range ir.DTypes() {
		dt["AMK_"+d.String()] = int64(d)
	}
	checkEnum(t, h, "amk_dtype_t", dt)

	sp := map[string]int64{}
	for _, s := range ir.MemSpaces() {
		sp["AMK_"+s.String()] = int64(s)
	}
	checkEnum(t, h, "amk_memspace_t", sp)

	bk := map[string]int64{}
	for _, k := range ir.BufferKinds() {
		bk["AMK_"+k.String()] = int64(k)
	}
	checkEnum(t, h, "amk_buffer_kind_t", bk)

	ops := map[string]int64{}
	for _, o := range ir.Ops() {
		ops["AMK_OP_"+o.String()] = int64(o)
	}
	ops["AMK_OP__COUNT"] = int64(len(ir.Ops()))
	checkEnum(t, h, "amk_opcode_t", ops)
	if o := h.order["amk_opcode_t"]; len(o) == 0 || o[len(o)-1] != "AMK_OP__COUNT" {
		t.Errorf("AMK_OP__COUNT must be the last opcode enumerator, order %v", o)
	}

	pats := map[string]int64{}
	for _, p := range ir.FusedPatterns() {
		pats["AMK_FUSED_"+p.Name] = int64(p.ID)
	}
	checkEnum(t, h, "amk_fused_pattern_t", pats)

	ab := map[string]int64{}
	for _, a := range abortTable {
		ab[a.cname] = int64(a.code)
	}
	checkEnum(t, h, "amk_abort_code_t", ab)
}

func TestHeaderParamsOrderMatchesIR(t *testing.T) {
	h := loadHeader(t)
	got := h.structs["amk_params_t"]
	if len(got) != len(ir.ParamFields) {
		t.Fatalf("amk_params_t has %d fields %v, ir.ParamFields has %d", len(got), got, len(ir.ParamFields))
	}
	for i, f := range ir.ParamFields {
		if got[i] != f.Name {
			t.Errorf("amk_params_t field %d is %q, ir.ParamFields says %q", i, got[i], f.Name)
		}
	}
	// The int32 fields come first, then the floats: the byte layout the marshaller writes.
	seenFloat := false
	for _, f := range ir.ParamFields {
		if f.Type == ir.ParamReal {
			seenFloat = true
		} else if seenFloat {
			t.Errorf("int field %s after a float field: amk_params_t layout assumes ints first", f.Name)
		}
	}
	if 4*len(ir.ParamFields) != ParamsSize {
		t.Errorf("%d param fields * 4 bytes != ParamsSize %d", len(ir.ParamFields), ParamsSize)
	}
}

func TestHeaderLayoutPinsMatchGo(t *testing.T) {
	h := loadHeader(t)
	want := layoutPins()
	for expr, v := range want {
		g, ok := h.pins[expr]
		if !ok {
			t.Errorf("abi.h lacks AMK_STATIC_ASSERT(%s == %d)", expr, v)
		} else if g != v {
			t.Errorf("abi.h pins %s == %d, Go uses %d", expr, g, v)
		}
	}
	for expr, v := range h.pins {
		if _, ok := want[expr]; !ok {
			t.Errorf("abi.h pins %s == %d, unknown to the Go layout table", expr, v)
		}
	}
	// The instruction struct fields appear in the order the offsets imply.
	wantInst := []string{"op", "n_inputs", "n_outputs", "n_waits", "inputs", "outputs",
		"wait_counter", "wait_threshold", "out_counter", "sm", "params"}
	if got := h.structs["amk_instruction_t"]; strings.Join(got, ",") != strings.Join(wantInst, ",") {
		t.Errorf("amk_instruction_t fields %v, want %v", got, wantInst)
	}
}

// TestHeaderCompilesWithHostCompiler checks the static asserts with a real C
// and C++ compiler when one is installed (the layout the GPU sees is the same
// LP64 layout).
func TestHeaderCompilesWithHostCompiler(t *testing.T) {
	abs, err := filepath.Abs("abi.h")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(src, []byte("#include \""+abs+"\"\nint main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ran := false
	for _, c := range [][]string{{"cc", "-std=c11"}, {"c++", "-std=c++17", "-x", "c++"}} {
		if _, err := exec.LookPath(c[0]); err != nil {
			continue
		}
		ran = true
		args := append(append([]string{}, c[1:]...), "-Wall", "-Werror", "-fsyntax-only", src)
		if out, err := exec.Command(c[0], args...).CombinedOutput(); err != nil {
			t.Errorf("%s rejects abi.h: %v\n%s", c[0], err, out)
		}
	}
	if !ran {
		t.Skip("no host C compiler")
	}
}

func TestAbortCodes(t *testing.T) {
	if AbortWatchdog.IsTrap() || AbortHost.IsTrap() || AbortNone.IsTrap() {
		t.Error("watchdog/host/none must not be traps")
	}
	if !TrapKVPos.IsTrap() || TrapKVPos.String() != "trap:kv-pos" {
		t.Errorf("TrapKVPos: %v %q", TrapKVPos.IsTrap(), TrapKVPos)
	}
	if AbortWatchdog.String() != "watchdog" || AbortCode(99).String() != "abort(99)" {
		t.Errorf("names: %q %q", AbortWatchdog, AbortCode(99))
	}
}

func TestDiagRoundTripAndDescribe(t *testing.T) {
	d := Diag{Code: AbortWatchdog, Block: 3, Task: 1, Op: int32(ir.OpGEMVTile), Counter: 7,
		Observed: 1, Threshold: 4, Detail: 0, WaitedNS: 2_500_000}
	b := d.Encode()
	if len(b) != DiagSize {
		t.Fatalf("encoded %d bytes", len(b))
	}
	got, err := DecodeDiag(b)
	if err != nil || got != d {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	p := ir.NewProgram()
	p.AddTask(ir.Task{Op: ir.OpNOP, Label: "a"})
	p.AddTask(ir.Task{Op: ir.OpGEMVTile, Label: "q[t0]"})
	msg := got.Describe(p)
	for _, want := range []string{"watchdog", "1:q[t0]", "GEMV_TILE", "counter 7", "observed 1 < threshold 4", "2.500 ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Describe %q lacks %q", msg, want)
		}
	}
	if _, err := DecodeDiag(b[:10]); err == nil {
		t.Error("short diag accepted")
	}
	// The streaming ring's wait (counter -1) names the fused task waiting,
	// the chunk and the slot, not a counter.
	p.AddTask(ir.Task{Op: ir.OpFUSED, Label: "qkv[t0]"})
	ring := Diag{Code: AbortWatchdog, Block: 2, Task: 2, Op: int32(ir.OpFUSED), Counter: RingWaitCounter,
		Observed: 40, Threshold: 51, Detail: 4, WaitedNS: 1_000_000}
	msg = ring.Describe(p)
	for _, want := range []string{"watchdog", "2:qkv[t0]", "FUSED", "streaming ring wait", "chunk 40", "51 issued", "ring slot 4"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ring Describe %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "counter") {
		t.Errorf("ring Describe %q names a counter", msg)
	}
	trap := Diag{Code: TrapKVPos, Task: 5, Op: int32(ir.OpKVAppend), Detail: 4096}
	if m := trap.Describe(nil); !strings.Contains(m, "trap:kv-pos") || !strings.Contains(m, "detail 4096") {
		t.Errorf("trap describe %q", m)
	}
}
