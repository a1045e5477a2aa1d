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
	case ir.F32, ir.F16, ir.BF16:
		return dt.String(), true
	}
	return "", false
}

// readChunkBytes is the unit of parallel reading.
const readChunkBytes = 4 << 20

// readTensors reads every expected tensor (already checked) on all cores.
func readTensors(index map[string]stRef, specs []KeySpec, cfg Config) (Weights, error) {
	type job struct {
		ref   stRef
		src   ir.DType
		dst   []float32
		begin int64 // first element of the chunk
	}
	w := make(Weights, len(specs))
	var jobs []job
	for _, spec := range specs {
		t := tensor.New(cfg.DType, spec.Shape...)
		w[spec.Key] = t
		ref := index[spec.Key]
		src, _ := stDType(ref.entry.dtype)
		per := readChunkBytes / (int64(src.Bits()) / 8)
		for lo := int64(0); lo < int64(len(t.F)); lo += per {
			hi := min(lo+per, int64(len(t.F)))
			jobs = append(jobs, job{ref, src, t.F[lo:hi], lo})
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
		buf := make([]byte, int64(len(jb.dst))*size)
		off := jb.ref.entry.begin + jb.begin*size
		if err := readAtFull(jb.ref.file.r, buf, off); err != nil {
			errs[j] = &SafetensorsError{File: jb.ref.file.name, Msg: fmt.Sprintf("reading %d bytes at offset %d: %v", len(buf), off, err)}
			return
		}
		decodeFloats(jb.dst, buf, jb.src)
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return w, nil
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
// order, each at its own dtype (F32, F16 or BF16), metadata {"format": "pt"},
// the header padded with spaces to a multiple of 8 bytes.
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
			return fmt.Errorf("WriteSafetensors: tensor %q has dtype %s; only F32, F16 and BF16 can be written", k, t.DType)
		}
		if len(t.F) != t.Numel() {
			return fmt.Errorf("WriteSafetensors: tensor %q holds %d values for shape %v", k, len(t.F), t.Shape)
		}
		n := t.DType.NBytes(int64(len(t.F)))
		shape := append([]int{}, t.Shape...)
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
	var b [4]byte
	for _, k := range keys {
		t := weights[k]
		for _, v := range t.F {
			switch t.DType {
			case ir.F32:
				binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
				bw.Write(b[:4])
			case ir.F16:
				binary.LittleEndian.PutUint16(b[:], tensor.FloatToF16(v))
				bw.Write(b[:2])
			default:
				binary.LittleEndian.PutUint16(b[:], tensor.FloatToBF16(v))
				bw.Write(b[:2])
			}
		}
	}
	return bw.Flush()
}
