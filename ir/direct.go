package ir

import (
	"encoding/binary"
	"math/bits"

	"github.com/amk-dev/amk/pyjson"
)

// The direct decoder reads a program's JSON straight into the IR structs: a
// byte scanner with no intermediate tree for the large parts of a program
// (buffers, counters, tasks). It only ever accepts: the moment it meets
// anything outside the common, plain form (an escape or a non-ASCII byte in
// a string, a float where an int is expected, a repeated or unknown key, a
// limit exceeded, a syntax error, ...) it gives up, and DecodeLimited runs
// the tree decoder (codec.go) on the same bytes, which is where every error
// message and its JSON path is built. Errors therefore cost a second pass,
// and the happy path builds no paths at all. The small free-form parts
// (meta, target, pages, config, and params values other than plain ints and
// strings) go through the tree parser on their own bytes, so their
// Python-compatible handling is the tree decoder's.
//
// Invariant, held by FuzzDirectDecode: whenever decodeDirect returns ok,
// the tree decoder accepts the same bytes and returns an equal Program.

// giveUp is the panic value of the direct decoder when it meets something
// it leaves to the tree decoder; decodeDirect recovers it.
type giveUp struct{}

// directNesting bounds the nesting of a value handed to the tree parser, so
// that such a value (parsed on its own, from depth 0) is never accepted
// where the whole document would have been too deep for pyjson.MaxDepth.
const directNesting = pyjson.MaxDepth / 2

// internLimit bounds the table of repeated short strings (param keys and
// numbers, enum names) shared between tasks.
const internLimit = 1 << 14

type direct struct {
	data     []byte
	pos      int
	maxItems int
	interned map[string]string
	recent   [251]string // the last interned string per slot (see intern)

	// Chunks the small per-task slices are cut from, so that a task costs
	// no allocation of its own.
	ints   []int
	waits  []Wait
	params []Param
	sms    []int
	// scratch holds a task's params while their number is unknown.
	scratch []Param

	// done, if set, is told that data[:n] will not be read again; doneAt is
	// the last n it was told.
	done   func(n int)
	doneAt int
}

// doneStep is how far decoding goes between calls of direct.done.
const doneStep = 1 << 20

// decodeDirect decodes data, or reports ok=false where the tree decoder must
// decide (every error, and every form the direct decoder does not handle).
func decodeDirect(data []byte, lim Limits) (p *Program, ok bool) {
	p, ok, _ = decodeDirectChecked(data, lim, nil)
	return p, ok
}

// decodeDirectChecked is decodeDirect that also returns a panic of the
// direct decoder other than its own giving up: a bug, which the tests fail
// on and Decode hides from its callers by falling back to the tree decoder.
//
// done, when not nil, is told as decoding goes which prefix of data it will
// not read again (see DecodePlain).
func decodeDirectChecked(data []byte, lim Limits, done func(n int)) (p *Program, ok bool, bug any) {
	defer func() {
		if r := recover(); r != nil {
			if _, mine := r.(giveUp); !mine {
				bug = r
			}
			p, ok = nil, false
		}
	}()
	d := direct{data: data, maxItems: lim.MaxItems, interned: make(map[string]string, 256), done: done}
	return d.program(), true, nil
}

func (d *direct) stop() { panic(giveUp{}) }

// spaces8 is eight ASCII spaces as one little-endian word.
const spaces8 = 0x2020202020202020

// space skips whitespace. Program files are indented (json.dumps with
// indent 2, so most of a file's bytes are the spaces that start its lines):
// runs of spaces are skipped eight bytes at a time.
func (d *direct) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ':
			for d.pos+8 <= len(d.data) {
				if w := binary.LittleEndian.Uint64(d.data[d.pos:]) ^ spaces8; w != 0 {
					d.pos += bits.TrailingZeros64(w) / 8
					break
				}
				d.pos += 8
			}
			for d.pos < len(d.data) && d.data[d.pos] == ' ' {
				d.pos++
			}
		case '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek is the next byte after whitespace (0 at the end of the input). Its
// fast path takes no whitespace or the one space after a colon.
func (d *direct) peek() byte {
	if p := d.pos; p+1 < len(d.data) {
		if c := d.data[p]; c > ' ' {
			return c
		} else if c == ' ' && d.data[p+1] > ' ' {
			d.pos = p + 1
			return d.data[p+1]
		}
	}
	d.space()
	if d.pos >= len(d.data) {
		return 0
	}
	return d.data[d.pos]
}

func (d *direct) expect(c byte) {
	if d.peek() != c {
		d.stop()
	}
	d.pos++
}

// more reads the separator after an element of an array or object: true
// for ',', false for the closing byte.
func (d *direct) more(closing byte) bool {
	switch d.peek() {
	case ',':
		d.pos++
		return true
	case closing:
		d.pos++
		return false
	}
	d.stop()
	return false
}

// open reads the opening byte of an array or object; false when it is
// empty (its closing byte is consumed too). Every array and object is read
// with the one loop
//
//	for more := d.open('[', ']'); more; more = d.more(']') { ...element... }
func (d *direct) open(opening, closing byte) bool {
	d.expect(opening)
	if d.peek() == closing {
		d.pos++
		return false
	}
	return true
}

// chunkTail is the list appended to chunk since start, capped so that a
// later append to it never writes into the chunk, and empty rather than nil.
func chunkTail[T any](chunk []T, start int) []T {
	out := chunk[start:len(chunk):len(chunk)]
	if out == nil {
		out = []T{}
	}
	return out
}

// plain reads a string made of printable ASCII only (no escapes) and returns
// its bytes, which alias the input.
func (d *direct) plain() []byte {
	if d.peek() != '"' {
		d.stop()
	}
	start := d.pos + 1
	for i := start; i < len(d.data); i++ {
		c := d.data[i]
		if c == '"' {
			d.pos = i + 1
			return d.data[start:i]
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			d.stop()
		}
	}
	d.stop()
	return nil
}

// key reads an object key and its colon.
func (d *direct) key() []byte {
	k := d.plain()
	d.expect(':')
	return k
}

func (d *direct) str() string { return string(d.plain()) }

// intern returns b as a string shared with earlier equal ones. A small
// table indexed by the length and the end bytes answers most lookups (a
// program repeats a few op names, param keys and numbers) without hashing.
func (d *direct) intern(b []byte) string {
	slot := 0
	if len(b) > 0 {
		slot = (len(b)*131 + int(b[0])*31 + int(b[len(b)-1])) % len(d.recent)
	}
	if s := d.recent[slot]; s == string(b) {
		return s
	}
	s, ok := d.interned[string(b)]
	if !ok {
		s = string(b)
		if len(d.interned) < internLimit {
			d.interned[s] = s
		}
	}
	d.recent[slot] = s
	return s
}

// number reads an integer literal (scanInt) and returns its value and its
// bytes.
func (d *direct) number() (int, []byte) {
	d.space()
	start := d.pos
	n, ok := d.scanInt()
	if !ok {
		d.stop()
	}
	return n, d.data[start:d.pos]
}

// scanInt reads the integer literal at d.pos, of at most 15 digits (well
// inside the tree decoder's ±2^53), and returns its value; ok is false
// where none stands there (d.pos is then anywhere).
func (d *direct) scanInt() (n int, ok bool) {
	neg := false
	if d.pos < len(d.data) && d.data[d.pos] == '-' {
		neg = true
		d.pos++
	}
	digits := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		n = n*10 + int(d.data[d.pos]-'0')
		d.pos++
	}
	count := d.pos - digits
	if count == 0 || count > 15 || (count > 1 && d.data[digits] == '0') {
		return 0, false
	}
	if d.pos < len(d.data) {
		if c := d.data[d.pos]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

func (d *direct) int() int { n, _ := d.number(); return n }

func (d *direct) null() bool {
	if d.peek() == 'n' {
		if d.pos+4 > len(d.data) || string(d.data[d.pos:d.pos+4]) != "null" {
			d.stop()
		}
		d.pos += 4
		return true
	}
	return false
}

// intList reads an array of ints into the shared chunk.
func (d *direct) intList(nonNegative bool) []int {
	start := len(d.ints)
	for more := d.open('[', ']'); more; more = d.more(']') {
		n := d.int()
		if nonNegative && n < 0 {
			d.stop()
		}
		d.ints = append(d.ints, n)
	}
	return chunkTail(d.ints, start)
}

// raw returns the bytes of the next value, found by bracket matching; the
// tree parser checks them.
func (d *direct) raw() []byte {
	d.space()
	start := d.pos
	depth := 0
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch c {
		case '"':
			d.pos++
			for d.pos < len(d.data) && d.data[d.pos] != '"' {
				if d.data[d.pos] == '\\' {
					d.pos++
				}
				d.pos++
			}
			if d.pos >= len(d.data) {
				d.stop()
			}
			d.pos++
		case '{', '[':
			depth++
			if depth > directNesting {
				d.stop()
			}
			d.pos++
		case '}', ']':
			if depth == 0 {
				return d.data[start:d.pos]
			}
			depth--
			d.pos++
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return d.data[start:d.pos]
			}
			d.pos++
		default:
			d.pos++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return d.data[start:d.pos]
		}
	}
	return d.data[start:d.pos]
}

// tree parses the next value with the tree parser (repeated keys refused).
func (d *direct) tree() pyjson.Value {
	v, err := pyjson.ParseUnique(d.raw())
	if err != nil {
		d.stop()
	}
	return v
}

// seen marks key bit in *mask, giving up on a repeated key.
func (d *direct) seen(mask *uint32, bit uint32) {
	if *mask&bit != 0 {
		d.stop()
	}
	*mask |= bit
}

func (d *direct) program() *Program {
	p := &Program{Meta: pyjson.ObjectValue(), ABIVersion: ABIVersion}
	var mask uint32
	for more := d.open('{', '}'); more; more = d.more('}') {
		switch string(d.key()) {
		case "ir_version":
			d.seen(&mask, 1<<0)
			p.IRVersion = d.version(IRVersion)
		case "abi_version":
			d.seen(&mask, 1<<1)
			p.ABIVersion = d.version(ABIVersion)
		case "meta":
			d.seen(&mask, 1<<2)
			if !d.null() {
				m := d.tree()
				if m.Kind != pyjson.Object {
					d.stop()
				}
				p.Meta = m
			}
		case "target":
			d.seen(&mask, 1<<3)
			if !d.null() {
				t := decoder{maxItems: d.maxItems}
				p.Target = t.target(d.tree(), "target")
				d.treeOK(t.err)
			}
		case "buffers":
			d.seen(&mask, 1<<4)
			p.Buffers = d.buffers()
		case "counters":
			d.seen(&mask, 1<<5)
			p.Counters = d.counters()
		case "tasks":
			d.seen(&mask, 1<<6)
			p.Tasks = d.tasks()
		case "pages":
			d.seen(&mask, 1<<7)
			if !d.null() {
				t := decoder{maxItems: d.maxItems}
				p.Pages = t.pages(d.tree(), "pages")
				d.treeOK(t.err)
			}
		case "config":
			d.seen(&mask, 1<<8)
			if !d.null() {
				var err error
				p.Config = ConfigFromValue(d.tree(), "config", &err)
				d.treeOK(err)
			}
		default:
			d.stop()
		}
	}
	d.space()
	if d.pos != len(d.data) || mask&(1<<0) == 0 || mask&(1<<6) == 0 {
		d.stop()
	}
	return p
}

func (d *direct) treeOK(err error) {
	if err != nil {
		d.stop()
	}
}

// version reads a version string whose major part matches runtime's.
func (d *direct) version(runtime string) string {
	s := d.str()
	if majorOf(s) != majorOf(runtime) {
		d.stop()
	}
	return s
}

func (d *direct) checkItems(n int) {
	if n > d.maxItems {
		d.stop()
	}
}

func (d *direct) buffers() []Buffer {
	out := make([]Buffer, 0, len(d.data)/4096)
	for more := d.open('[', ']'); more; more = d.more(']') {
		out = append(out, d.buffer())
		d.checkItems(len(out))
	}
	return out
}

func (d *direct) buffer() Buffer {
	var b Buffer
	var mask uint32
	var err error
	for more := d.open('{', '}'); more; more = d.more('}') {
		switch string(d.key()) {
		case "id":
			d.seen(&mask, 1<<0)
			b.ID = d.int()
		case "name":
			d.seen(&mask, 1<<1)
			b.Name = d.str()
		case "kind":
			d.seen(&mask, 1<<2)
			b.Kind, err = ParseBufferKind(d.intern(d.plain()))
			d.treeOK(err)
		case "dtype":
			d.seen(&mask, 1<<3)
			b.DType, err = ParseDType(d.intern(d.plain()))
			d.treeOK(err)
		case "shape":
			d.seen(&mask, 1<<4)
			b.Shape = d.intList(true)
		case "space":
			d.seen(&mask, 1<<5)
			b.Space, err = ParseMemSpace(d.intern(d.plain()))
			d.treeOK(err)
		case "source":
			d.seen(&mask, 1<<6)
			if !d.null() {
				s := d.str()
				b.Source = &s
			}
		default:
			d.stop()
		}
	}
	if mask&0x3f != 0x3f {
		d.stop()
	}
	return b
}

func (d *direct) counters() []Counter {
	out := make([]Counter, 0, len(d.data)/8192)
	for more := d.open('[', ']'); more; more = d.more(']') {
		out = append(out, d.counter())
		d.checkItems(len(out))
	}
	return out
}

func (d *direct) counter() Counter {
	var c Counter
	var mask uint32
	for more := d.open('{', '}'); more; more = d.more('}') {
		switch string(d.key()) {
		case "id":
			d.seen(&mask, 1<<0)
			c.ID = d.int()
		case "init":
			d.seen(&mask, 1<<1)
			c.Init = d.int()
		case "note":
			d.seen(&mask, 1<<2)
			c.Note = d.str()
		default:
			d.stop()
		}
	}
	if mask&1 == 0 {
		d.stop()
	}
	return c
}

// sampleTasks is how many tasks are decoded before the rest is sized from
// them.
const sampleTasks = 64

// tasks reads the task list. The first sampleTasks tasks give the bytes per
// task and the inputs, outputs, waits and params per task of this file; the
// task slice and the chunks are then allocated once for the rest of the
// input at that rate (with a little room), so that no slice is regrown and
// copied on the way.
func (d *direct) tasks() []Task {
	start := d.pos
	out := make([]Task, 0, sampleTasks)
	d.ints = make([]int, 0, 4*sampleTasks)
	d.waits = make([]Wait, 0, 2*sampleTasks)
	d.params = make([]Param, 0, 4*sampleTasks)
	d.sms = make([]int, 0, sampleTasks)
	for more := d.open('[', ']'); more; more = d.more(']') {
		if len(out) == sampleTasks {
			out = d.sizeFromSample(out, d.pos-start)
		}
		out = append(out, d.task())
		d.checkItems(len(out))
		if d.done != nil && d.pos-d.doneAt >= doneStep {
			// Every value before d.pos has been copied out of data.
			d.doneAt = d.pos
			d.done(d.pos)
		}
	}
	return out
}

// sizeFromSample reallocates the task slice and fresh chunks for the tasks
// the rest of the input can hold, at the rate the sample (the tasks decoded
// so far, in sampleBytes bytes) shows.
func (d *direct) sizeFromSample(sample []Task, sampleBytes int) []Task {
	n := len(sample)
	rest := (len(d.data)-d.pos)/max(sampleBytes/n, 1) + 1
	rest += rest/16 + 16
	per := func(used int) int { return rest*used/n + rest/16 + 16 }
	out := make([]Task, n, n+rest)
	copy(out, sample)
	d.ints = make([]int, 0, per(len(d.ints)))
	d.waits = make([]Wait, 0, per(len(d.waits)))
	d.params = make([]Param, 0, per(len(d.params)))
	d.sms = make([]int, 0, per(len(d.sms)))
	return out
}

func (d *direct) task() Task {
	var t Task
	var mask uint32
	var err error
	for more := d.open('{', '}'); more; more = d.more('}') {
		switch string(d.key()) {
		case "id":
			d.seen(&mask, 1<<0)
			t.ID = d.int()
		case "op":
			d.seen(&mask, 1<<1)
			t.Op, err = ParseOp(d.intern(d.plain()))
			d.treeOK(err)
		case "inputs":
			d.seen(&mask, 1<<2)
			t.Inputs = d.intList(false)
		case "outputs":
			d.seen(&mask, 1<<3)
			t.Outputs = d.intList(false)
		case "out_counter":
			d.seen(&mask, 1<<4)
			t.OutCounter = d.int()
		case "waits":
			d.seen(&mask, 1<<5)
			t.Waits = d.waitList()
		case "params":
			d.seen(&mask, 1<<6)
			t.Params = d.paramList()
		case "sm":
			d.seen(&mask, 1<<7)
			if !d.null() {
				if len(d.sms) == cap(d.sms) {
					// A new chunk; pointers into the old one stay valid.
					d.sms = make([]int, 0, 1024)
				}
				d.sms = append(d.sms, d.int())
				t.SM = &d.sms[len(d.sms)-1]
			}
		case "est_bytes":
			d.seen(&mask, 1<<8)
			t.EstBytes = int64(d.int())
		case "est_flops":
			d.seen(&mask, 1<<9)
			t.EstFlops = int64(d.int())
		case "label":
			d.seen(&mask, 1<<10)
			t.Label = d.str()
		default:
			d.stop()
		}
	}
	if mask&0x1f != 0x1f {
		d.stop()
	}
	return t
}

func (d *direct) waitList() []Wait {
	start := len(d.waits)
	for more := d.open('[', ']'); more; more = d.more(']') {
		d.waits = append(d.waits, d.wait())
	}
	return chunkTail(d.waits, start)
}

func (d *direct) wait() Wait {
	var w Wait
	var mask uint32
	for more := d.open('{', '}'); more; more = d.more('}') {
		switch string(d.key()) {
		case "counter":
			d.seen(&mask, 1<<0)
			w.Counter = d.int()
		case "threshold":
			d.seen(&mask, 1<<1)
			w.Threshold = d.int()
		default:
			d.stop()
		}
	}
	if mask != 3 {
		d.stop()
	}
	return w
}

// maxDirectParams bounds the params of one task the direct decoder checks
// for repeated keys (pairwise); more are left to the tree decoder.
const maxDirectParams = 64

func (d *direct) paramList() Params {
	d.scratch = d.scratch[:0]
	for more := d.open('{', '}'); more; more = d.more('}') {
		k := d.key()
		key := d.intern(k)
		for _, q := range d.scratch {
			if q.Key == key {
				d.stop()
			}
		}
		d.scratch = append(d.scratch, Param{Key: key, Val: d.paramValue()})
		if len(d.scratch) > maxDirectParams {
			d.stop()
		}
	}
	if len(d.params)+len(d.scratch) > cap(d.params) {
		d.params = make([]Param, 0, max(1024, len(d.scratch)))
	}
	start := len(d.params)
	d.params = append(d.params, d.scratch...)
	return Params(d.params[start:len(d.params):len(d.params)])
}

// paramValue reads a param value: plain ints and strings directly, anything
// else through the tree parser.
func (d *direct) paramValue() pyjson.Value {
	switch c := d.peek(); {
	case c == '"':
		save := d.pos
		for i := d.pos + 1; i < len(d.data); i++ {
			if b := d.data[i]; b == '\\' || b < 0x20 || b >= 0x80 {
				return d.tree()
			} else if b == '"' {
				break
			}
		}
		d.pos = save
		return pyjson.Value{Kind: pyjson.String, S: d.str()}
	case c == '-' || (c >= '0' && c <= '9'):
		start := d.pos
		if _, ok := d.scanInt(); ok {
			lit := d.data[start:d.pos]
			if string(lit) == "-0" {
				lit = lit[1:]
			}
			return pyjson.Value{Kind: pyjson.Int, Num: d.intern(lit)}
		}
		d.pos = start
	}
	return d.tree()
}
