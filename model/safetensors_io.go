package model

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"unsafe"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// stDType maps a loadable safetensors dtype name to an ir.DType.
func stDType(name string) (ir.DType, bool) {
	switch name {
	case "F32":
		return ir.F32, true
	case "F16":
		return ir.F16, true
	case "BF16":
		return ir.BF16, true
	}
	return 0, false
}

// stName is the safetensors dtype name of a writable ir.DType.
func stName(dt ir.DType) (string, bool) {
	switch dt {
	case ir.F32, ir.F16, ir.BF16, ir.I8:
		return dt.String(), true
	case ir.I4:
		return "U8", true // packed, two per byte
	}
	return "", false
}

// readChunkBytes is the unit of parallel reading.
const readChunkBytes = 4 << 20

// readTensors reads every expected tensor (already checked) on all cores:
// at the model's dtype, BF16 and F16 held at their stored width, F32 (or
// fp16/bf16 widened into an F32 model) as float32. A tensor of an in-memory
// file stored at the model's dtype is a view of the file's bytes where
// viewStored allows.
func readTensors(refs map[string]stRef, specs []KeySpec, cfg Config) (Weights, error) {
	type job struct {
		ref    stRef
		src    ir.DType
		t      *tensor.Tensor
		lo, hi int // element range of the chunk
	}
	w := make(Weights, len(specs))
	var jobs []job
	for _, spec := range specs {
		ref := refs[spec.Key]
		if spec.Role == RoleScales || spec.DType != cfg.DType {
			t, err := readQuantTensor(ref, spec)
			if err != nil {
				return nil, err
			}
			w[spec.Key] = t
			continue
		}
		src, _ := stDType(ref.entry.dtype)
		if data := ref.file.data; data != nil && src == cfg.DType {
			if t := viewStored(cfg.DType, spec.Shape, data[ref.entry.begin:ref.entry.end]); t != nil {
				w[spec.Key] = t
				continue
			}
		}
		t := tensor.NewStored(cfg.DType, spec.Shape...)
		w[spec.Key] = t
		per := readChunkBytes / (src.Bits() / 8)
		for lo := 0; lo < t.FloatCount(); lo += per {
			jobs = append(jobs, job{ref, src, t, lo, min(lo+per, t.FloatCount())})
		}
	}
	errs := make([]error, len(jobs))
	workers := runtime.GOMAXPROCS(0)
	if cfg.WeightBytes() < readChunkBytes {
		workers = 1 // small models are read on the calling goroutine
	}
	parallelForN(workers, len(jobs), func(j int) {
		jb := jobs[j]
		size := int64(jb.src.Bits() / 8)
		buf := make([]byte, int64(jb.hi-jb.lo)*size)
		off := jb.ref.entry.begin + int64(jb.lo)*size
		if err := readAtFull(jb.ref.file.r, buf, off); err != nil {
			errs[j] = &SafetensorsError{File: jb.ref.file.name, Msg: fmt.Sprintf("reading %d bytes at offset %d: %v", len(buf), off, err)}
			return
		}
		if h := jb.t.Half; h != nil { // stored at the model's dtype: the bits as they are
			dst := h[jb.lo:jb.hi]
			for i := range dst {
				dst[i] = binary.LittleEndian.Uint16(buf[2*i:])
			}
			return
		}
		decodeFloats(jb.t.F[jb.lo:jb.hi], buf, jb.src)
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return w, nil
}

// littleEndianHost is whether the host's byte order is safetensors'.
var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// viewStored returns a tensor of dtype dt whose values are the
// little-endian bytes b in place (BF16/F16 as Half, F32 as F), or nil when
// b cannot be viewed: a big-endian host, bytes not aligned to the element
// size, or another dtype.
func viewStored(dt ir.DType, shape []int, b []byte) *tensor.Tensor {
	size := uintptr(dt.Bits() / 8)
	if !littleEndianHost || len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%size != 0 {
		return nil
	}
	t := &tensor.Tensor{DType: dt, Shape: append([]int(nil), shape...)}
	switch {
	case tensor.HeldAtStoredWidth(dt):
		t.Half = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
	case dt == ir.F32:
		t.F = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
	default:
		return nil
	}
	return t
}

// readAtFull fills buf from off; io.EOF alongside a full read is success.
func readAtFull(r io.ReaderAt, buf []byte, off int64) error {
	n, err := r.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// decodeFloats widens little-endian F32/F16/BF16 values into dst.
func decodeFloats(dst []float32, src []byte, dt ir.DType) {
	switch dt {
	case ir.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case ir.F16:
		for i := range dst {
			dst[i] = tensor.F16ToFloat(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case ir.BF16:
		for i := range dst {
			dst[i] = tensor.BF16ToFloat(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
}

// WriteSafetensors writes weights as a .safetensors file: tensors in key
// order, each at its own dtype (F32, F16 or BF16; an int8 weight as I8, a
// packed int4 one as U8 [.., K/2], docs/spec/quantization.md), metadata
// {"format": "pt"}, the header padded with spaces to a multiple of 8 bytes.
func WriteSafetensors(w io.Writer, weights Weights) error {
	keys := make([]string, 0, len(weights))
	for k := range weights {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	type entry struct {
		DType       string  `json:"dtype"`
		Shape       []int   `json:"shape"`
		DataOffsets []int64 `json:"data_offsets"`
	}
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, k := range keys {
		t := weights[k]
		if t == nil {
			return fmt.Errorf("WriteSafetensors: tensor %q is nil", k)
		}
		name, ok := stName(t.DType)
		if !ok {
			return fmt.Errorf("WriteSafetensors: tensor %q has dtype %s; only F32, F16, BF16, I8 and I4 can be written", k, t.DType)
		}
		if storedCount(t) != storedCount(&tensor.Tensor{DType: t.DType, Shape: t.Shape}) {
			return fmt.Errorf("WriteSafetensors: tensor %q holds %d stored units for shape %v", k, storedCount(t), t.Shape)
		}
		n := t.DType.NBytes(int64(t.Numel()))
		shape := append([]int{}, t.Shape...)
		if t.DType == ir.I4 {
			if len(shape) == 0 || shape[len(shape)-1]%2 != 0 {
				return fmt.Errorf("WriteSafetensors: int4 tensor %q of shape %v: rows must have an even length to pack into bytes", k, t.Shape)
			}
			shape[len(shape)-1] /= 2
		}
		header[k] = entry{name, shape, []int64{off, off + n}}
		off += n
	}
	js, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	bw.Write(lenBuf[:])
	bw.Write(js)
	const chunk = 1 << 16 // values encoded per write
	buf := make([]byte, 0, 4*chunk)
	for _, k := range keys {
		t := weights[k]
		switch t.DType {
		case ir.I8:
			bw.Write(t.Bytes)
			continue
		case ir.I4:
			bw.Write(t.Packed)
			continue
		}
		for lo := 0; lo < t.FloatCount(); lo += chunk {
			buf = appendStored(buf[:0], t, lo, min(lo+chunk, t.FloatCount()))
			bw.Write(buf)
		}
	}
	return bw.Flush()
}

// appendStored appends elements [lo, hi) of a float tensor at its dtype's
// little-endian storage: Half's bits as they are, F rounded to the dtype.
func appendStored(buf []byte, t *tensor.Tensor, lo, hi int) []byte {
	le := binary.LittleEndian
	switch {
	case t.Half != nil:
		for _, h := range t.Half[lo:hi] {
			buf = le.AppendUint16(buf, h)
		}
	case t.DType == ir.F32:
		for _, v := range t.F[lo:hi] {
			buf = le.AppendUint32(buf, math.Float32bits(v))
		}
	default:
		for _, v := range t.F[lo:hi] {
			buf = le.AppendUint16(buf, tensor.ToHalf(t.DType, v))
		}
	}
	return buf
}
