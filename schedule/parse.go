package schedule

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/didyoumean"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// ParsePoint reads a point from a JSON config dict (with an optional
// "kernel_knobs" object). It is strict about types and ranges, as the
// reference harness's type-sanity check is: every
// problem found is reported, joined by "; ", and the text is a clean
// rejected_reason. Missing keys take the canonical defaults (so {} is
// Default()); unknown top-level keys are dropped (additive compatibility,
// docs/spec/ir.md; IgnoredKeys names them); a repeated key is an error.
func ParsePoint(data []byte) (Point, error) {
	v, err := pyjson.ParseUnique(data)
	if err != nil {
		return Point{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return PointFromValue(v)
}

// configKeys are the top-level keys of a config dict that amk reads.
var configKeys = []string{"tiling", "fusion_grouping", "sm_assignment", "pipelining_depth",
	"page_allocation", "threads_per_block", "smem_bytes_per_block", "kernel_knobs"}

// tileSizes are the tiling entries amk knows: the ones the lowering consumes
// (the device lowering's too) and the reserved attention.kv_block.
var tileSizes = map[string][]string{"gemv": {"N_tile", "base_width", "tiles_per_sm"},
	"attention": {"kv_block", "n_partitions", "kv_head_split", "head_counters"}}

// offSizes are the tiling entries where 0 is a value (off, as when absent):
// the device lowering's switches and counts.
var offSizes = map[string]bool{"gemv.tiles_per_sm": true, "attention.kv_head_split": true, "attention.head_counters": true}

// IgnoredKeys names what a config dict holds that amk reads past without an
// error: unknown top-level keys (dropped, docs/spec/ir.md's forward compatibility)
// and tiling entries no lowering consumes (kept in the record, no effect),
// e.g. a misspelt "tilling" that would otherwise leave the default tiling in
// place without a word. Names are written as Python subscripts. A value
// that is not an object has no ignored keys.
func IgnoredKeys(v pyjson.Value) []string {
	var out []string
	for _, k := range UnknownKeys(v) {
		out = append(out, k.Name)
	}
	return out
}

// UnknownKey is one key IgnoredKeys names, with the known keys beside it
// that the user probably meant.
type UnknownKey struct {
	Name string // as a Python subscript: 'tilling', tiling['gemv']['N_tlie']
	Hint string // didyoumean's hint among the keys known at that level, or ""
}

// String is the name followed by the hint in parentheses, if any.
func (k UnknownKey) String() string {
	if k.Hint == "" {
		return k.Name
	}
	return k.Name + " (" + k.Hint + ")"
}

// UnknownKeys is IgnoredKeys with a "did you mean" for each key.
func UnknownKeys(v pyjson.Value) []UnknownKey {
	var out []UnknownKey
	if v.Kind != pyjson.Object {
		return nil
	}
	for _, m := range v.Obj {
		if !slices.Contains(configKeys, m.Key) {
			out = append(out, UnknownKey{fmt.Sprintf("'%s'", m.Key), didyoumean.Hint(m.Key, configKeys)})
		}
	}
	if t, ok := v.Get("tiling"); ok && t.Kind == pyjson.Object {
		for _, arch := range t.Obj {
			known, ok := tileSizes[arch.Key]
			if !ok {
				out = append(out, UnknownKey{fmt.Sprintf("tiling['%s']", arch.Key), didyoumean.Hint(arch.Key, slices.Sorted(maps.Keys(tileSizes)))})
				continue
			}
			for _, s := range arch.Val.Obj {
				if !slices.Contains(known, s.Key) {
					out = append(out, UnknownKey{fmt.Sprintf("tiling['%s']['%s']", arch.Key, s.Key), didyoumean.Hint(s.Key, known)})
				}
			}
		}
	}
	return out
}

// ErrMalformed is the error of a config that is not a JSON object at all;
// its text is "malformed ScheduleConfig: ...". A type or range problem in a
// well-formed object is reported without that prefix.
var ErrMalformed = errors.New("malformed ScheduleConfig")

// PointFromValue is ParsePoint on an already parsed JSON value.
func PointFromValue(v pyjson.Value) (Point, error) {
	if v.Kind != pyjson.Object {
		return Point{}, fmt.Errorf("%w: expected a JSON object, got %s", ErrMalformed, pyType(v))
	}
	var c checker
	p := Default()
	if t, ok := v.Get("tiling"); ok {
		p.Config.Tiling = c.tiling(t)
	}
	if f, ok := v.Get("fusion_grouping"); ok {
		p.Config.FusionGrouping = c.fusion(f)
	}
	if s, ok := v.Get("sm_assignment"); ok {
		p.Config.SMAssignment = c.smAssignment(s)
	}
	if d, ok := v.Get("pipelining_depth"); ok {
		if n, ok := c.int(d, "pipelining_depth", "must be a non-negative int"); ok {
			switch {
			case n < 0:
				c.addf("pipelining_depth=%d must be a non-negative int", n)
			case n > maxPipeliningDepth:
				c.addf("pipelining_depth=%d exceeds the maximum %d", n, maxPipeliningDepth)
			default:
				p.Config.PipeliningDepth = n
			}
		}
	}
	if s, ok := v.Get("page_allocation"); ok {
		switch {
		case s.Kind != pyjson.String:
			c.addf("page_allocation=%s must be a string", s.Repr())
		case !slices.Contains(pagePolicies, s.S):
			c.addf("page_allocation=%s is not a known policy (%s)", s.Repr(), strings.Join(pagePolicies, ", "))
		default:
			p.Config.PageAllocation = s.S
		}
	}
	if t, ok := v.Get("threads_per_block"); ok {
		if n, ok := c.int(t, "threads_per_block", "must be an int"); ok {
			p.Config.ThreadsPerBlock = n
		}
	}
	if s, ok := v.Get("smem_bytes_per_block"); ok {
		if n, ok := c.int(s, "smem_bytes_per_block", "must be an int"); ok {
			p.Config.SmemBytesPerBlock = n
		}
	}
	if k, ok := v.Get("kernel_knobs"); ok {
		p.Knobs = c.knobs(k)
	}
	if len(c.errs) > 0 {
		return Point{}, errors.New(strings.Join(c.errs, "; "))
	}
	return p, nil
}

// checker accumulates type-sanity errors.
type checker struct{ errs []string }

func (c *checker) addf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// int reads an int32-sized JSON integer (bools and floats are not ints, as
// in Python's isinstance check), reporting "{name}={repr} {what}" otherwise.
func (c *checker) int(v pyjson.Value, name, what string) (int, bool) {
	if v.Kind == pyjson.Int {
		if n, ok := v.Int64(); ok && n >= math.MinInt32 && n <= math.MaxInt32 {
			return int(n), true
		}
		c.addf("%s=%s is out of the int32 range", name, v.Repr())
		return 0, false
	}
	c.addf("%s=%s %s", name, v.Repr(), what)
	return 0, false
}

func (c *checker) tiling(t pyjson.Value) []ir.TilingEntry {
	if t.Kind != pyjson.Object {
		c.addf("tiling must be an object, got %s", pyType(t))
		return nil
	}
	entries := []ir.TilingEntry{}
	for _, arch := range t.Obj {
		if arch.Val.Kind != pyjson.Object {
			c.addf("tiling['%s'] must be an object", arch.Key)
			continue
		}
		e := ir.TilingEntry{Op: arch.Key, Sizes: []ir.TileSize{}}
		for _, s := range arch.Val.Obj {
			name := fmt.Sprintf("tiling['%s']['%s']", arch.Key, s.Key)
			n, ok := c.int(s.Val, name, "must be a positive int")
			if !ok {
				continue
			}
			if n < 1 && !(n == 0 && offSizes[arch.Key+"."+s.Key]) {
				c.addf("%s=%d must be a positive int", name, n)
				continue
			}
			e.Sizes = setSize(e.Sizes, s.Key, n)
		}
		entries = setEntry(entries, e)
	}
	return entries
}

// setSize and setEntry give repeated JSON keys Python's last-one-wins meaning.
func setSize(sizes []ir.TileSize, name string, v int) []ir.TileSize {
	for i := range sizes {
		if sizes[i].Name == name {
			sizes[i].Value = v
			return sizes
		}
	}
	return append(sizes, ir.TileSize{Name: name, Value: v})
}

func setEntry(entries []ir.TilingEntry, e ir.TilingEntry) []ir.TilingEntry {
	for i := range entries {
		if entries[i].Op == e.Op {
			entries[i] = e
			return entries
		}
	}
	return append(entries, e)
}

func (c *checker) fusion(f pyjson.Value) [][]string {
	if f.Kind != pyjson.Array {
		c.addf("fusion_grouping must be a list of groups, got %s", pyType(f))
		return nil
	}
	groups := make([][]string, 0, len(f.Arr))
	for i, g := range f.Arr {
		if g.Kind != pyjson.Array {
			c.addf("fusion_grouping[%d] must be a list of op-group names, got %s", i, pyType(g))
			continue
		}
		names := make([]string, 0, len(g.Arr))
		for j, n := range g.Arr {
			if n.Kind != pyjson.String || !slices.Contains(fusionNames, n.S) {
				c.addf("fusion_grouping[%d][%d]=%s is not a known op-group name (%s)", i, j, n.Repr(),
					strings.Join(fusionNames, ", "))
				continue
			}
			names = append(names, n.S)
		}
		groups = append(groups, names)
	}
	return groups
}

func (c *checker) smAssignment(s pyjson.Value) ir.SMAssignment {
	switch s.Kind {
	case pyjson.String:
		if s.S != PolicyRoundRobin && s.S != PolicyLoadBalance {
			c.addf("sm_assignment=%s is not a known policy (%s, %s)", s.Repr(), PolicyRoundRobin, PolicyLoadBalance)
			return ir.SMAssignment{Policy: PolicyLoadBalance}
		}
		return ir.SMAssignment{Policy: s.S}
	case pyjson.Object:
		// Keys are int-cast as the reference does, so "5" and " 5" name one
		// task: refused like any repeated key (the reference's dict would
		// keep the later pin silently).
		pins := []ir.SMPin{}
		keyOf := map[int]string{} // task id -> the key that pinned it
		for _, m := range s.Obj {
			tid, err := strconv.Atoi(strings.TrimSpace(m.Key))
			if err != nil || tid < 0 {
				c.addf("sm_assignment key '%s' is not a non-negative integer task id", m.Key)
				continue
			}
			name := fmt.Sprintf("sm_assignment['%s']", m.Key)
			sm, ok := c.int(m.Val, name, "must be a non-negative int")
			if !ok {
				continue
			}
			if sm < 0 {
				c.addf("%s=%d must be a non-negative int", name, sm)
				continue
			}
			if first, dup := keyOf[tid]; dup {
				c.addf("sm_assignment keys '%s' and '%s' both pin task %d: duplicate key", first, m.Key, tid)
				continue
			}
			keyOf[tid] = m.Key
			pins = append(pins, ir.SMPin{Task: tid, SM: sm})
		}
		return ir.SMAssignment{Explicit: pins}
	}
	c.addf("sm_assignment=%s must be a policy string or a {task_id: sm} map", s.Repr())
	return ir.SMAssignment{Policy: PolicyLoadBalance}
}

func (c *checker) knobs(k pyjson.Value) map[string]int {
	knobs := DefaultKnobs()
	if k.Kind != pyjson.Object {
		c.addf("kernel_knobs must be an object, got %s", pyType(k))
		return knobs
	}
	for _, m := range k.Obj {
		spec, ok := findKernelKnob(m.Key)
		if !ok {
			hint := didyoumean.Hint(m.Key, strings.Split(knownKnobNames(), ", "))
			if hint != "" {
				hint += "; "
			}
			c.addf("kernel_knobs: unknown knob '%s' (%sknown: %s)", m.Key, hint, knownKnobNames())
			continue
		}
		name := fmt.Sprintf("kernel_knobs['%s']", m.Key)
		n, ok := c.int(m.Val, name, "must be an int")
		if !ok {
			continue
		}
		if n < spec.min || n > spec.max {
			c.addf("%s=%d is out of the validated range [%d,%d]", name, n, spec.min, spec.max)
			continue
		}
		knobs[m.Key] = n
	}
	if (knobs["lb_maxthreads"] > 0) != (knobs["lb_minblocks"] > 0) {
		c.addf("kernel_knobs lb_maxthreads and lb_minblocks must be both > 0 or both 0")
	}
	return knobs
}

func knownKnobNames() string {
	names := make([]string, len(kernelKnobs))
	for i, k := range kernelKnobs {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}

// pyType names a JSON value's decoded Python type, for messages.
func pyType(v pyjson.Value) string {
	switch v.Kind {
	case pyjson.Null:
		return "NoneType"
	case pyjson.Bool:
		return "bool"
	case pyjson.Int:
		return "int"
	case pyjson.Float:
		return "float"
	case pyjson.String:
		return "str"
	case pyjson.Array:
		return "list"
	}
	return "dict"
}
