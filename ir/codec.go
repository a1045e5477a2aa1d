package ir

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/pyjson"
)

// MaxProgramBytes is the default bound on the size of a program file: 64
// MiB, over three times a 70B-shape program (about 18 MB; an 8B one is about
// 6 MB). The direct decoder costs under 2 bytes of memory and about 5 ns per
// byte of JSON, but a file it gives up on (every malformed one) costs the
// tree decoder's 16 bytes and 40 ns per byte (a 200 MB file: 3.2 GB before
// any check), so the bound is what keeps an oversized file cheap to refuse;
// callers with bigger genuine programs raise it (amkctl validate --max-bytes).
const MaxProgramBytes = 64 << 20

// MaxProgramItems is the default bound on the number of tasks, of buffers,
// of counters and of pages in one program (2^18: a 70B-shape program has
// about 37,000 tasks). It bounds the validator's work, which grows faster
// than linearly with the task count on adversarial graphs.
const MaxProgramItems = 1 << 18

// Limits bound what DecodeLimited accepts; a zero field takes its default.
type Limits struct {
	MaxBytes int64 // size of the JSON text
	MaxItems int   // tasks, buffers, counters and pages, each
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = MaxProgramBytes
	}
	if l.MaxItems <= 0 {
		l.MaxItems = MaxProgramItems
	}
	return l
}

// ErrTooLarge is wrapped by errors for a program over its Limits.
var ErrTooLarge = errors.New("program too large")

// ErrVersion is wrapped by errors for a major ir_version/abi_version mismatch.
var ErrVersion = errors.New("major version mismatch")

// DecodeError is a malformed program file, located by a JSON path such as
// tasks[3].waits[0].threshold.
type DecodeError struct {
	Path string
	Msg  string
}

func (e *DecodeError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Decode reads a program from its JSON form (docs/spec/ir.md §6) within the
// default Limits.
//
// Forward compatibility is exactly docs/spec/ir.md's: unknown (newer) keys of
// target and config are dropped, meta is free-form, and unknown params are
// left to the validator (a warning). Anywhere else an unknown key is an
// error, as are a repeated key, a missing required key (the root needs
// ir_version and tasks: a document without them is not a program), a wrong
// type, an unknown enum name, a non-finite target figure and a major
// version mismatch; each error names its JSON path. Decode never panics.
func Decode(data []byte) (*Program, error) { return DecodeLimited(data, Limits{}) }

// DecodeLimited is Decode within the given limits.
func DecodeLimited(data []byte, lim Limits) (*Program, error) {
	lim = lim.withDefaults()
	if int64(len(data)) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrTooLarge, len(data), lim.MaxBytes)
	}
	if p, ok := decodeDirect(data, lim); ok {
		return p, nil
	}
	return decodeTree(data, lim)
}

// DecodePlain is DecodeLimited's fast path alone: the program when data is
// one in the plain form amk's encoder writes (within lim), and otherwise
// ok=false at once, with no error built: an error, an unusual form, or a
// document that is no program at all. DecodeLimited then gives the answer.
// A caller that tells programs from other documents (amkctl validate, which
// also reads MPK task graphs) tries this first, so that a program costs no
// look for the other format.
//
// done, when not nil, is called as the decoder goes (about once per MiB
// of tasks) with an n such that it will not read data[:n] again, so that a
// caller holding data in a memory map can hand those pages back. The
// Program never refers to data.
func DecodePlain(data []byte, lim Limits, done func(n int)) (p *Program, ok bool) {
	lim = lim.withDefaults()
	if int64(len(data)) > lim.MaxBytes {
		return nil, false
	}
	p, ok, _ = decodeDirectChecked(data, lim, done)
	return p, ok
}

// decodeTree is the tree decoder: the document parsed into a pyjson tree,
// then mapped to a Program. It is the definition of what a program file may
// hold and of every error message; the direct decoder (direct.go) is its
// fast path for the documents it accepts.
func decodeTree(data []byte, lim Limits) (*Program, error) {
	root, err := pyjson.ParseUnique(data)
	if err != nil {
		return nil, err
	}
	return fromValue(root, lim)
}

// FromValue maps a parsed JSON document to a Program within the default
// Limits (repeated keys are the parser's business: see pyjson.ParseUnique).
func FromValue(root pyjson.Value) (*Program, error) { return fromValue(root, Limits{}.withDefaults()) }

func fromValue(root pyjson.Value, lim Limits) (*Program, error) {
	d := decoder{maxItems: lim.MaxItems}
	p := d.program(root)
	if d.err != nil {
		return nil, d.err
	}
	return p, nil
}

type decoder struct {
	err      error
	maxItems int
}

// Keys each object of a program may hold; anything else is refused.
var (
	programKeys = []string{"ir_version", "abi_version", "meta", "target", "buffers", "counters", "tasks", "pages", "config"}
	bufferKeys  = []string{"id", "name", "kind", "dtype", "shape", "space", "source"}
	counterKeys = []string{"id", "init", "note"}
	taskKeys    = []string{"id", "op", "inputs", "outputs", "out_counter", "waits", "params", "sm", "est_bytes", "est_flops", "label"}
	waitKeys    = []string{"counter", "threshold"}
	pagesKeys   = []string{"buffer_to_page", "pages"}
	pageKeys    = []string{"id", "space", "nbytes", "live_start", "live_end"}
)

// onlyKeys fails on the first key of obj not in known.
func (d *decoder) onlyKeys(obj pyjson.Value, path string, known []string) {
	for _, m := range obj.Obj {
		if !slices.Contains(known, m.Key) {
			d.fail(join(path, m.Key), "unknown key (only target and config may hold keys this amk does not know)")
			return
		}
	}
}

// items is array plus the item-count limit.
func (d *decoder) items(v pyjson.Value, path string) []pyjson.Value {
	arr := d.array(v, path)
	if len(arr) > d.maxItems {
		if d.err == nil {
			d.err = fmt.Errorf("%w: %s has %d entries, over the limit of %d", ErrTooLarge, path, len(arr), d.maxItems)
		}
		return nil
	}
	return arr
}

func (d *decoder) fail(path, format string, args ...any) {
	if d.err == nil {
		d.err = &DecodeError{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func (d *decoder) object(v pyjson.Value, path string) bool {
	if v.Kind != pyjson.Object {
		d.fail(path, "expected an object, got %s", v.Kind)
		return false
	}
	return true
}

func (d *decoder) field(obj pyjson.Value, path, key string, required bool) (pyjson.Value, bool) {
	v, ok := obj.Get(key)
	if !ok && required {
		d.fail(join(path, key), "required key is missing")
	}
	return v, ok
}

func (d *decoder) intOf(v pyjson.Value, path string) int {
	i, ok := v.Int64()
	if !ok || i != int64(int(i)) || i > 1<<53 || i < -(1<<53) {
		if v.Kind == pyjson.Int {
			d.fail(path, "integer %s out of range", v.Num)
		} else {
			d.fail(path, "expected an integer, got %s %s", v.Kind, v.Repr())
		}
		return 0
	}
	return int(i)
}

func (d *decoder) int64Of(v pyjson.Value, path string) int64 { return int64(d.intOf(v, path)) }

func (d *decoder) floatOf(v pyjson.Value, path string) float64 {
	f, ok := v.Float64()
	if !ok {
		d.fail(path, "expected a number, got %s %s", v.Kind, v.Repr())
	}
	return f
}

// finiteOf is floatOf refusing NaN and the infinities (target figures feed
// the bandwidth floors and the cost model, where NaN would pass every
// comparison).
func (d *decoder) finiteOf(v pyjson.Value, path string) float64 {
	f := d.floatOf(v, path)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail(path, "expected a finite number, got %s", v.Repr())
		return 0
	}
	return f
}

func (d *decoder) boolOf(v pyjson.Value, path string) bool {
	if v.Kind != pyjson.Bool {
		d.fail(path, "expected true or false, got %s %s", v.Kind, v.Repr())
	}
	return v.B
}

func (d *decoder) stringOf(v pyjson.Value, path string) string {
	if v.Kind != pyjson.String {
		d.fail(path, "expected a string, got %s %s", v.Kind, v.Repr())
	}
	return v.S
}

func (d *decoder) array(v pyjson.Value, path string) []pyjson.Value {
	if v.Kind != pyjson.Array {
		d.fail(path, "expected an array, got %s", v.Kind)
		return nil
	}
	return v.Arr
}

func (d *decoder) ints(v pyjson.Value, path string) []int {
	arr := d.array(v, path)
	out := make([]int, len(arr))
	for i, e := range arr {
		out[i] = d.intOf(e, index(path, i))
	}
	return out
}

func (d *decoder) intOr(obj pyjson.Value, path, key string, def int) int {
	v, ok := obj.Get(key)
	if !ok {
		return def
	}
	return d.intOf(v, join(path, key))
}

func majorOf(v string) string { return strings.SplitN(v, ".", 2)[0] }

func (d *decoder) version(root pyjson.Value, key, runtime, what string) string {
	v, ok := root.Get(key)
	if !ok {
		return runtime
	}
	var s string
	switch v.Kind {
	case pyjson.String:
		s = v.S
	case pyjson.Int, pyjson.Float:
		s = v.Num
	default:
		d.fail(key, "expected a version string, got %s", v.Kind)
		return runtime
	}
	if majorOf(s) != majorOf(runtime) && d.err == nil {
		d.err = fmt.Errorf("%w: %s major version mismatch: file %s vs runtime %s", ErrVersion, what, s, runtime)
	}
	return s
}

func (d *decoder) program(root pyjson.Value) *Program {
	if root.Kind != pyjson.Object {
		d.fail("", "not a megakernel program: expected a JSON object, got %s", root.Kind)
		return nil
	}
	for _, key := range []string{"ir_version", "tasks"} {
		if _, ok := root.Get(key); !ok {
			d.fail("", "not a megakernel program: required key %q is missing (a program is an object with ir_version, buffers, counters and tasks)", key)
			return nil
		}
	}
	d.onlyKeys(root, "", programKeys)
	p := &Program{}
	p.IRVersion = d.version(root, "ir_version", IRVersion, "IR")
	p.ABIVersion = d.version(root, "abi_version", ABIVersion, "ABI")
	p.Meta = pyjson.ObjectValue()
	if m, ok := root.Get("meta"); ok && m.Kind != pyjson.Null {
		if d.object(m, "meta") {
			p.Meta = m
		}
	}
	if t, ok := root.Get("target"); ok && t.Kind != pyjson.Null {
		p.Target = d.target(t, "target")
	}
	if v, ok := root.Get("buffers"); ok {
		arr := d.items(v, "buffers")
		p.Buffers = make([]Buffer, len(arr))
		for i, b := range arr {
			p.Buffers[i] = d.buffer(b, index("buffers", i))
		}
	}
	if v, ok := root.Get("counters"); ok {
		arr := d.items(v, "counters")
		p.Counters = make([]Counter, len(arr))
		for i, c := range arr {
			path := index("counters", i)
			if !d.object(c, path) {
				break
			}
			d.onlyKeys(c, path, counterKeys)
			id, _ := d.field(c, path, "id", true)
			p.Counters[i] = Counter{ID: d.intOf(id, join(path, "id")), Init: d.intOr(c, path, "init", 0)}
			if n, ok := c.Get("note"); ok {
				p.Counters[i].Note = d.stringOf(n, join(path, "note"))
			}
		}
	}
	if v, ok := root.Get("tasks"); ok {
		arr := d.items(v, "tasks")
		p.Tasks = make([]Task, len(arr))
		for i, t := range arr {
			p.Tasks[i] = d.task(t, index("tasks", i))
			if d.err != nil {
				break
			}
		}
	}
	if v, ok := root.Get("pages"); ok && v.Kind != pyjson.Null {
		p.Pages = d.pages(v, "pages")
	}
	if v, ok := root.Get("config"); ok && v.Kind != pyjson.Null {
		p.Config = ConfigFromValue(v, "config", &d.err)
	}
	return p
}

func (d *decoder) target(v pyjson.Value, path string) *GpuTarget {
	if !d.object(v, path) {
		return nil
	}
	t := &GpuTarget{SupportsCooperative: true}
	req := func(key string) pyjson.Value { x, _ := d.field(v, path, key, true); return x }
	t.Name = d.stringOf(req("name"), join(path, "name"))
	t.SMArch = d.intOf(req("sm_arch"), join(path, "sm_arch"))
	t.NumSMs = d.intOf(req("num_sms"), join(path, "num_sms"))
	t.SmemBytesPerSM = d.intOf(req("smem_bytes_per_sm"), join(path, "smem_bytes_per_sm"))
	t.SmemBytesPerBlockOptin = d.intOf(req("smem_bytes_per_block_optin"), join(path, "smem_bytes_per_block_optin"))
	t.RegsPerSM = d.intOf(req("regs_per_sm"), join(path, "regs_per_sm"))
	t.MaxThreadsPerSM = d.intOf(req("max_threads_per_sm"), join(path, "max_threads_per_sm"))
	t.MaxRegsPerThread = d.intOf(req("max_regs_per_thread"), join(path, "max_regs_per_thread"))
	t.L2Bytes = d.int64Of(req("l2_bytes"), join(path, "l2_bytes"))
	t.HBMBytes = d.int64Of(req("hbm_bytes"), join(path, "hbm_bytes"))
	t.HBMBandwidthGBs = d.finiteOf(req("hbm_bandwidth_gbs"), join(path, "hbm_bandwidth_gbs"))
	t.FP16TFLOPS = d.finiteOf(req("fp16_tflops"), join(path, "fp16_tflops"))
	if x, ok := v.Get("clock_ghz"); ok {
		t.ClockGHz = d.finiteOf(x, join(path, "clock_ghz"))
	}
	if x, ok := v.Get("supports_cooperative"); ok {
		t.SupportsCooperative = d.boolOf(x, join(path, "supports_cooperative"))
	}
	if x, ok := v.Get("wddm_tdr"); ok {
		t.WDDMTDR = d.boolOf(x, join(path, "wddm_tdr"))
	}
	if x, ok := v.Get("measured_bw_gbs"); ok {
		t.MeasuredBWGBs = d.finiteOf(x, join(path, "measured_bw_gbs"))
	}
	if x, ok := v.Get("note"); ok {
		t.Note = d.stringOf(x, join(path, "note"))
	}
	if x, ok := v.Get("vendor"); ok {
		t.Vendor = d.stringOf(x, join(path, "vendor"))
		if t.Vendor != VendorNVIDIA && t.Vendor != VendorAMD {
			d.fail(join(path, "vendor"), "unknown vendor %q (known: %s, %s)", t.Vendor, VendorNVIDIA, VendorAMD)
		}
	}
	if x, ok := v.Get("wavefront_size"); ok {
		t.WavefrontSize = d.intOf(x, join(path, "wavefront_size"))
	}
	if x, ok := v.Get("l1_bytes_per_sm"); ok {
		t.L1BytesPerSM = d.intOf(x, join(path, "l1_bytes_per_sm"))
	}
	if x, ok := v.Get("last_level_cache_bytes"); ok {
		t.LastLevelCacheBytes = d.int64Of(x, join(path, "last_level_cache_bytes"))
	}
	if x, ok := v.Get("matrix_tflops"); ok && d.object(x, join(path, "matrix_tflops")) {
		t.MatrixTFLOPS = make(map[string]float64, len(x.Obj))
		for _, m := range x.Obj {
			t.MatrixTFLOPS[m.Key] = d.floatOf(m.Val, join(join(path, "matrix_tflops"), m.Key))
		}
	}
	return t
}

func (d *decoder) buffer(v pyjson.Value, path string) Buffer {
	var b Buffer
	if !d.object(v, path) {
		return b
	}
	d.onlyKeys(v, path, bufferKeys)
	req := func(key string) pyjson.Value { x, _ := d.field(v, path, key, true); return x }
	b.ID = d.intOf(req("id"), join(path, "id"))
	b.Name = d.stringOf(req("name"), join(path, "name"))
	var err error
	if b.Kind, err = ParseBufferKind(d.stringOf(req("kind"), join(path, "kind"))); err != nil {
		d.fail(join(path, "kind"), "%v", err)
	}
	if b.DType, err = ParseDType(d.stringOf(req("dtype"), join(path, "dtype"))); err != nil {
		d.fail(join(path, "dtype"), "%v", err)
	}
	b.Shape = d.ints(req("shape"), join(path, "shape"))
	for i, s := range b.Shape {
		if s < 0 {
			d.fail(index(join(path, "shape"), i), "negative dimension %d", s)
		}
	}
	if b.Space, err = ParseMemSpace(d.stringOf(req("space"), join(path, "space"))); err != nil {
		d.fail(join(path, "space"), "%v", err)
	}
	if s, ok := v.Get("source"); ok && s.Kind != pyjson.Null {
		src := d.stringOf(s, join(path, "source"))
		b.Source = &src
	}
	return b
}

func (d *decoder) task(v pyjson.Value, path string) Task {
	var t Task
	if !d.object(v, path) {
		return t
	}
	d.onlyKeys(v, path, taskKeys)
	req := func(key string) pyjson.Value { x, _ := d.field(v, path, key, true); return x }
	t.ID = d.intOf(req("id"), join(path, "id"))
	op, err := ParseOp(d.stringOf(req("op"), join(path, "op")))
	if err != nil {
		d.fail(join(path, "op"), "%v", err)
	}
	t.Op = op
	t.Inputs = d.ints(req("inputs"), join(path, "inputs"))
	t.Outputs = d.ints(req("outputs"), join(path, "outputs"))
	t.OutCounter = d.intOf(req("out_counter"), join(path, "out_counter"))
	if w, ok := v.Get("waits"); ok {
		arr := d.array(w, join(path, "waits"))
		t.Waits = make([]Wait, len(arr))
		for i, e := range arr {
			wp := index(join(path, "waits"), i)
			if !d.object(e, wp) {
				break
			}
			d.onlyKeys(e, wp, waitKeys)
			c, _ := d.field(e, wp, "counter", true)
			th, _ := d.field(e, wp, "threshold", true)
			if th.Kind == pyjson.Bool {
				d.fail(join(wp, "threshold"), "threshold %s is not a positive static int", th.Repr())
			}
			t.Waits[i] = Wait{Counter: d.intOf(c, join(wp, "counter")), Threshold: d.intOf(th, join(wp, "threshold"))}
		}
	}
	if ps, ok := v.Get("params"); ok {
		if d.object(ps, join(path, "params")) {
			t.Params = make(Params, len(ps.Obj))
			for i, m := range ps.Obj {
				t.Params[i] = Param{Key: m.Key, Val: m.Val}
			}
		}
	}
	if s, ok := v.Get("sm"); ok && s.Kind != pyjson.Null {
		sm := d.intOf(s, join(path, "sm"))
		t.SM = &sm
	}
	if x, ok := v.Get("est_bytes"); ok {
		t.EstBytes = d.int64Of(x, join(path, "est_bytes"))
	}
	if x, ok := v.Get("est_flops"); ok {
		t.EstFlops = d.int64Of(x, join(path, "est_flops"))
	}
	if x, ok := v.Get("label"); ok {
		t.Label = d.stringOf(x, join(path, "label"))
	}
	return t
}

func (d *decoder) pages(v pyjson.Value, path string) *PageAllocation {
	if !d.object(v, path) {
		return nil
	}
	pa := &PageAllocation{}
	d.onlyKeys(v, path, pagesKeys)
	if b2p, ok := v.Get("buffer_to_page"); ok {
		bp := join(path, "buffer_to_page")
		if d.object(b2p, bp) {
			for _, m := range b2p.Obj {
				bid, err := strconv.Atoi(strings.TrimSpace(m.Key))
				if err != nil {
					d.fail(bp, "key %q is not an integer buffer id", m.Key)
					return pa
				}
				pa.BufferToPage = append(pa.BufferToPage, PageBinding{Buffer: bid, Page: d.intOf(m.Val, join(bp, m.Key))})
			}
		}
	}
	if ps, ok := v.Get("pages"); ok {
		arr := d.items(ps, join(path, "pages"))
		pa.Pages = make([]Page, len(arr))
		for i, e := range arr {
			pp := index(join(path, "pages"), i)
			if !d.object(e, pp) {
				break
			}
			d.onlyKeys(e, pp, pageKeys)
			req := func(key string) pyjson.Value { x, _ := d.field(e, pp, key, true); return x }
			pg := Page{ID: d.intOf(req("id"), join(pp, "id")), NBytes: d.int64Of(req("nbytes"), join(pp, "nbytes")),
				LiveStart: d.intOr(e, pp, "live_start", -1), LiveEnd: d.intOr(e, pp, "live_end", -1)}
			sp, err := ParseMemSpace(d.stringOf(req("space"), join(pp, "space")))
			if err != nil {
				d.fail(join(pp, "space"), "%v", err)
			}
			pg.Space = sp
			pa.Pages[i] = pg
		}
	}
	return pa
}

// ConfigFromValue maps a ScheduleConfig JSON object to the data form. Unknown
// keys are dropped; missing keys take the dataclass defaults; a wrong type is
// reported through *errp (the first error wins) with its path.
func ConfigFromValue(v pyjson.Value, path string, errp *error) *ScheduleConfig {
	d := decoder{err: *errp}
	defer func() { *errp = d.err }()
	if !d.object(v, path) {
		return nil
	}
	c := &ScheduleConfig{SMAssignment: SMAssignment{Policy: "load_balance"}, PipeliningDepth: 2,
		PageAllocation: "graph_color", ThreadsPerBlock: 256}
	if t, ok := v.Get("tiling"); ok {
		tp := join(path, "tiling")
		if d.object(t, tp) {
			c.Tiling = []TilingEntry{}
			for _, m := range t.Obj {
				ep := join(tp, m.Key)
				if !d.object(m.Val, ep) {
					break
				}
				e := TilingEntry{Op: m.Key, Sizes: []TileSize{}}
				for _, s := range m.Val.Obj {
					e.Sizes = append(e.Sizes, TileSize{Name: s.Key, Value: d.intOf(s.Val, join(ep, s.Key))})
				}
				c.Tiling = append(c.Tiling, e)
			}
		}
	}
	if f, ok := v.Get("fusion_grouping"); ok {
		fp := join(path, "fusion_grouping")
		groups := d.array(f, fp)
		c.FusionGrouping = make([][]string, len(groups))
		for i, g := range groups {
			names := d.array(g, index(fp, i))
			c.FusionGrouping[i] = make([]string, len(names))
			for j, n := range names {
				c.FusionGrouping[i][j] = d.stringOf(n, index(index(fp, i), j))
			}
		}
	}
	if s, ok := v.Get("sm_assignment"); ok {
		sp := join(path, "sm_assignment")
		switch s.Kind {
		case pyjson.String:
			c.SMAssignment = SMAssignment{Policy: s.S}
		case pyjson.Object:
			pins := []SMPin{}
			for _, m := range s.Obj {
				tid, err := strconv.Atoi(strings.TrimSpace(m.Key))
				if err != nil {
					d.fail(sp, "key %q is not an integer task id", m.Key)
					break
				}
				pins = append(pins, SMPin{Task: tid, SM: d.intOf(m.Val, join(sp, m.Key))})
			}
			c.SMAssignment = SMAssignment{Explicit: pins}
		default:
			d.fail(sp, "expected a policy name or a {task_id: sm} object, got %s", s.Kind)
		}
	}
	c.PipeliningDepth = d.intOr(v, path, "pipelining_depth", c.PipeliningDepth)
	if s, ok := v.Get("page_allocation"); ok {
		c.PageAllocation = d.stringOf(s, join(path, "page_allocation"))
	}
	c.ThreadsPerBlock = d.intOr(v, path, "threads_per_block", c.ThreadsPerBlock)
	c.SmemBytesPerBlock = d.intOr(v, path, "smem_bytes_per_block", c.SmemBytesPerBlock)
	return c
}
