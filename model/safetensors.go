package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// MaxSafetensorsHeader bounds the JSON header of a .safetensors file (the
// format's own limit is 100 MB).
const MaxSafetensorsHeader = 100 << 20

// stItemSize is the element size of every safetensors dtype amk recognises
// (only F32, F16 and BF16 can be loaded; the others are sized so that their
// byte ranges can still be checked).
var stItemSize = map[string]int64{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}

// stEntry is one tensor of a safetensors header; begin and end are absolute
// file offsets.
type stEntry struct {
	dtype      string
	shape      []int
	begin, end int64
}

// stFile is a parsed safetensors file.
type stFile struct {
	name    string
	r       io.ReaderAt
	data    []byte // the whole file when it lies in memory (MapSafetensors), else nil
	entries map[string]stEntry
	order   []string
}

// SafetensorsError is a malformed safetensors file.
type SafetensorsError struct {
	File string
	Msg  string
}

func (e *SafetensorsError) Error() string {
	return fmt.Sprintf("safetensors %s: %s", e.File, e.Msg)
}

// parseSafetensors reads and checks the header of a file of the given size:
// 8-byte little-endian header length, a JSON object of tensor entries
// (dtype, shape, data_offsets relative to the end of the header) and an
// optional "__metadata__" entry, which is ignored.
func parseSafetensors(name string, r io.ReaderAt, size int64) (*stFile, error) {
	fail := func(format string, args ...any) error {
		return &SafetensorsError{File: name, Msg: fmt.Sprintf(format, args...)}
	}
	if size < 8 {
		return nil, fail("file is %d bytes, shorter than the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if err := readAtFull(r, lenBuf[:], 0); err != nil {
		return nil, fail("reading the header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxSafetensorsHeader {
		return nil, fail("header length %d exceeds the %d-byte limit", n, MaxSafetensorsHeader)
	}
	if int64(n) > size-8 {
		return nil, fail("header length %d exceeds the %d bytes after the length field", n, size-8)
	}
	header := make([]byte, n)
	if err := readAtFull(r, header, 8); err != nil {
		return nil, fail("reading the %d-byte header: %v", n, err)
	}
	root, err := pyjson.Parse(header)
	if err != nil {
		return nil, fail("header is not valid JSON: %v", err)
	}
	if root.Kind != pyjson.Object {
		return nil, fail("header must be a JSON object, got %s", root.Kind)
	}
	dataStart := 8 + int64(n)
	f := &stFile{name: name, r: r, entries: make(map[string]stEntry, len(root.Obj))}
	for _, m := range root.Obj {
		if m.Key == "__metadata__" {
			continue
		}
		if _, dup := f.entries[m.Key]; dup {
			return nil, fail("tensor %q is listed twice", m.Key)
		}
		e, msg := parseEntry(m.Val, size-dataStart)
		if msg != "" {
			return nil, fail("tensor %q: %s", m.Key, msg)
		}
		e.begin += dataStart
		e.end += dataStart
		f.entries[m.Key] = e
		f.order = append(f.order, m.Key)
	}
	return f, nil
}

// parseEntry checks one header entry against the data section's size.
func parseEntry(v pyjson.Value, dataSize int64) (stEntry, string) {
	var e stEntry
	if v.Kind != pyjson.Object {
		return e, "entry must be an object"
	}
	dt, ok := v.Get("dtype")
	if !ok || dt.Kind != pyjson.String {
		return e, "dtype must be a string"
	}
	e.dtype = dt.S
	shape, ok := v.Get("shape")
	if !ok || shape.Kind != pyjson.Array || len(shape.Arr) > 8 {
		return e, "shape must be an array of at most 8 dimensions"
	}
	numel := int64(1)
	for _, d := range shape.Arr {
		n, ok := d.Int64()
		if !ok || n < 0 || n > math.MaxInt32 {
			return e, fmt.Sprintf("shape %s has an invalid dimension", pyjson.Compact(shape, false))
		}
		e.shape = append(e.shape, int(n))
		if n != 0 && numel > (math.MaxInt64/8)/n {
			return e, fmt.Sprintf("shape %s is too large", pyjson.Compact(shape, false))
		}
		numel *= n
	}
	offs, ok := v.Get("data_offsets")
	if !ok || offs.Kind != pyjson.Array || len(offs.Arr) != 2 {
		return e, "data_offsets must be an array [begin, end]"
	}
	begin, ok1 := offs.Arr[0].Int64()
	end, ok2 := offs.Arr[1].Int64()
	if !ok1 || !ok2 || begin < 0 || end < begin || end > dataSize {
		return e, fmt.Sprintf("data_offsets %s lie outside the %d-byte data section", pyjson.Compact(offs, false), dataSize)
	}
	e.begin, e.end = begin, end
	if size, known := stItemSize[e.dtype]; known && end-begin != numel*size {
		return e, fmt.Sprintf("%s shape %v needs %d bytes, data_offsets span %d", e.dtype, e.shape, numel*size, end-begin)
	}
	return e, ""
}

// LoadSafetensors reads cfg's weights from a .safetensors file by HF
// state-dict key (see ReadSafetensors for the checks).
func LoadSafetensors(path string, cfg Config) (Weights, error) {
	return LoadSafetensorsShards([]string{path}, cfg)
}

// LoadSafetensorsShards reads cfg's weights from one or more .safetensors
// files (the shards of a checkpoint); a key present in two shards is an
// error.
func LoadSafetensorsShards(paths []string, cfg Config) (Weights, error) {
	files := make([]*stFile, 0, len(paths))
	for _, p := range paths {
		fh, info, err := inputfile.Open(p) // regular files only, never blocks
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		f, err := parseSafetensors(p, fh, info.Size())
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return loadWeights(files, cfg)
}

// ReadSafetensors reads cfg's weights from a safetensors image of size bytes.
// Every expected key (Keys(cfg)) must be present with its shape and a dtype
// of F32, F16 or BF16 that converts exactly to cfg's dtype (the same dtype,
// or fp16/bf16 widened into an F32 model). Projection biases and unmodelled
// tensors inside the model's layers (q/k norms and the like) are rejected;
// keys of layers beyond cfg.NLayers, rotary inv_freq buffers, a tied
// checkpoint's lm_head.weight and other unrelated entries are ignored. All
// problems are reported at once, naming up to 8 missing keys.
func ReadSafetensors(r io.ReaderAt, size int64, cfg Config) (Weights, error) {
	f, err := parseSafetensors("image", r, size)
	if err != nil {
		return nil, err
	}
	return loadWeights([]*stFile{f}, cfg)
}

// MapSafetensors is ReadSafetensors on a safetensors image in memory (a
// file mapping): every tensor stored at the model's dtype is a view of data,
// not a copy, where the host is little-endian and the tensor's bytes are
// aligned to its element size (files written by WriteSafetensors are);
// the others are copied. data must stay unchanged and readable as long as
// the weights are used.
func MapSafetensors(data []byte, cfg Config) (Weights, error) {
	f, err := parseSafetensors("image", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	f.data = data
	return loadWeights([]*stFile{f}, cfg)
}

type stRef struct {
	file  *stFile
	entry stEntry
}

func loadWeights(files []*stFile, cfg Config) (Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	index := map[string]stRef{}
	var problems []string
	for _, f := range files {
		for _, k := range f.order {
			if prev, dup := index[k]; dup {
				problems = append(problems, fmt.Sprintf("%s is in both %s and %s", k, prev.file.name, f.name))
				continue
			}
			index[k] = stRef{f, f.entries[k]}
		}
	}
	if len(problems) == 0 && cfg.Quant.On() && !holdsQuantized(index, cfg) {
		// A float checkpoint of a quantised model: its weights, quantised.
		base, err := loadWeights(files, cfg.Float())
		if err != nil {
			return nil, err
		}
		return Quantize(cfg, base)
	}
	specs := Keys(cfg)
	refs := make(map[string]stRef, len(specs))
	names := make(map[string]bool, len(specs))
	var missing []string
	for _, spec := range specs {
		name, msg := lookupEntry(index, spec)
		if msg != "" {
			problems = append(problems, msg)
			continue
		}
		if name == "" {
			missing = append(missing, spec.Key)
			continue
		}
		ref := index[name]
		refs[spec.Key], names[name] = ref, true
		if msg := checkEntry(ref.entry, spec, cfg); msg != "" {
			problems = append(problems, name+": "+msg)
		}
	}
	problems = append(problems, unmodelledTensors(files, cfg, names)...)
	if len(missing) > 0 {
		problems = append([]string{missingSummary(missing, cfg)}, problems...)
	}
	if len(problems) > 0 {
		return nil, &WeightsError{Problems: problems}
	}
	return readTensors(refs, specs, cfg)
}

// checkEntry checks an expected tensor's shape and dtype: a float tensor
// at a dtype that converts exactly to cfg's, or a quantised projection or
// its scales in an accepted layout (checkQuantEntry).
func checkEntry(e stEntry, spec KeySpec, cfg Config) string {
	if spec.Role == RoleScales || spec.DType != cfg.DType {
		return checkQuantEntry(e, spec)
	}
	if !slices.Equal(e.shape, spec.Shape) {
		return fmt.Sprintf("shape %v in the file, the model needs %v", e.shape, spec.Shape)
	}
	dt, ok := stDType(e.dtype)
	if !ok {
		return fmt.Sprintf("dtype %s cannot be loaded (F32, F16 and BF16 can)", e.dtype)
	}
	if dt != cfg.DType && !(dt.Bits() < cfg.DType.Bits() && cfg.DType.Bits() == 32) {
		return fmt.Sprintf("dtype %s in the file does not convert exactly to the model dtype %s", e.dtype, cfg.DType)
	}
	return ""
}

// projections are the names of the bias-free projections.
var projections = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// unmodelledTensors lists projection biases anywhere, tensors of
// quantisation layouts amk does not read (by name), and unexpected tensors
// inside the model's layers. expected holds the file names the model's keys
// were found under.
func unmodelledTensors(files []*stFile, cfg Config, expected map[string]bool) []string {
	prefix := "layers."
	if cfg.KeyScheme == SchemeHF {
		prefix = "model.layers."
	}
	var biases, foreign, extra []string
	for _, f := range files {
		for _, k := range f.order {
			if strings.HasSuffix(k, ".bias") && containsAny(k, projections) {
				biases = append(biases, k)
				continue
			}
			if expected[k] {
				continue
			}
			if foreignQuantTensor(k) {
				foreign = append(foreign, k)
				continue
			}
			if strings.HasSuffix(k, "rotary_emb.inv_freq") || !strings.HasPrefix(k, prefix) {
				continue
			}
			if layer, ok := leadingInt(k[len(prefix):]); ok && layer < cfg.NLayers {
				extra = append(extra, k)
			}
		}
	}
	var out []string
	if len(biases) > 0 {
		out = append(out, fmt.Sprintf("the checkpoint has %d projection bias tensor(s) the bias-free template cannot model (e.g. %s)",
			len(biases), strings.Join(biases[:min(4, len(biases))], ", ")))
	}
	if len(foreign) > 0 {
		out = append(out, fmt.Sprintf("the checkpoint holds %d tensor(s) of a quantisation layout amk does not read (e.g. %s): "+
			"amk reads int8 [N, K] or packed int4 uint8 [N, K/2] weights with symmetric F16 scales named KEY%s (docs/spec/quantization.md)",
			len(foreign), strings.Join(foreign[:min(4, len(foreign))], ", "), ir.ScalesSuffix))
	}
	if len(extra) > 0 {
		out = append(out, fmt.Sprintf("the checkpoint's layers hold %d tensor(s) the Llama template does not model (e.g. %s)",
			len(extra), strings.Join(extra[:min(4, len(extra))], ", ")))
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// leadingInt parses "12.rest" → 12.
func leadingInt(s string) (int, bool) {
	n, digits := 0, 0
	for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' && digits < 9 {
		n = n*10 + int(s[digits]-'0')
		digits++
	}
	return n, digits > 0 && digits < len(s) && s[digits] == '.'
}
