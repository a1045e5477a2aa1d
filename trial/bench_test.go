package trial

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/validate"
)

// BenchmarkDecodeStep compares, in one run, the reference VM's decode step
// on the real lowering of the canonical default schedule (weights at their
// stored width), the same step reading a float32 copy of the weights, the
// eager oracle's step, and the physical floor: one read of the weights'
// stored bytes on every core (readStored). vm-vs-stored-read alternates a
// VM step and a read within every iteration, so that both see the same
// machine load, and reports their mean times and ratio.
func BenchmarkDecodeStep(b *testing.B) {
	for _, name := range []string{"toy", "small"} {
		lm, err := NewModelCache(0).Get(name, "")
		if err != nil {
			b.Fatal(err)
		}
		target, _ := ir.Target("h200")
		prog, err := schedule.Lower(lm.Config, target, schedule.Default(), schedule.LowerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if rep := validate.Validate(prog); !rep.OK {
			b.Fatal(rep.Reason(3))
		}
		words, bytes := storedWords(b, lm.Weights)
		step := func(b *testing.B, w model.Weights) {
			if _, err := RunStep(prog, w, DefaultToken, 0, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name+"/reference-vm", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				step(b, lm.Weights)
			}
		})
		b.Run(name+"/reference-vm-float32-weights", func(b *testing.B) {
			plain := widened(lm.Weights) // the VM as it read weights before reading them at their stored width
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step(b, plain)
			}
		})
		b.Run(name+"/eager", func(b *testing.B) {
			e, err := model.NewEager(lm.Config, lm.Weights)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.Reset()
				if _, err := e.Step(DefaultToken, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/vm-vs-stored-read", func(b *testing.B) {
			var vmTime, readTime time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				step(b, lm.Weights)
				t1 := time.Now()
				readStored(words)
				vmTime, readTime = vmTime+t1.Sub(t0), readTime+time.Since(t1)
			}
			b.ReportMetric(float64(vmTime.Microseconds())/1e3/float64(b.N), "vm-ms/op")
			b.ReportMetric(float64(readTime.Microseconds())/1e3/float64(b.N), "read-ms/op")
			b.ReportMetric(vmTime.Seconds()/readTime.Seconds(), "vm/read")
			b.ReportMetric(float64(bytes)/1e6, "stored-MB")
		})
	}
}

var sink uint64

// BenchmarkWeightReadStored is the floor at the weights' stored width: one
// read of every stored byte of small's weights (2 bytes per bf16 weight),
// on all cores, as 64-bit words (readStored) and, slower, as uint16 values
// summed (what a kernel widening one weight at a time must at least do).
func BenchmarkWeightReadStored(b *testing.B) {
	lm, err := NewModelCache(0).Get("small", "")
	if err != nil {
		b.Fatal(err)
	}
	words, n := storedWords(b, lm.Weights)
	b.Run("words", func(b *testing.B) {
		b.SetBytes(n)
		for i := 0; i < b.N; i++ {
			readStored(words)
		}
	})
	b.Run("uint16-sum", func(b *testing.B) {
		var halves [][]uint16
		for _, t := range lm.Weights {
			halves = append(halves, t.Half)
		}
		b.SetBytes(n)
		for i := 0; i < b.N; i++ {
			parallelEach(len(halves), func(j int) uint64 {
				var a0, a1, a2, a3 uint64
				s := halves[j]
				k := 0
				for ; k+4 <= len(s); k += 4 {
					q := s[k : k+4 : k+4]
					a0 += uint64(q[0])
					a1 += uint64(q[1])
					a2 += uint64(q[2])
					a3 += uint64(q[3])
				}
				for _, v := range s[k:] {
					a0 += uint64(v)
				}
				return a0 + a1 + a2 + a3
			})
		}
	})
}

// storedWords views every weight's stored bytes (Half or F) as 64-bit
// words, in spans of at most 1 MiB, and returns them with their byte count.
func storedWords(b *testing.B, w model.Weights) ([][]uint64, int64) {
	const span = 1 << 17 // words
	var out [][]uint64
	var n int64
	for k, t := range w {
		var p unsafe.Pointer
		var size int
		switch {
		case t.Half != nil:
			p, size = unsafe.Pointer(unsafe.SliceData(t.Half)), 2*len(t.Half)
		default:
			p, size = unsafe.Pointer(unsafe.SliceData(t.F)), 4*len(t.F)
		}
		if size%8 != 0 || uintptr(p)%8 != 0 {
			b.Fatalf("%s: %d stored bytes at %p are not whole aligned words", k, size, p)
		}
		all := unsafe.Slice((*uint64)(p), size/8)
		for lo := 0; lo < len(all); lo += span {
			out = append(out, all[lo:min(lo+span, len(all))])
		}
		n += int64(size)
	}
	return out, n
}

// readStored reads every word once, spread over all cores.
func readStored(words [][]uint64) {
	parallelEach(len(words), func(j int) uint64 {
		var a0, a1, a2, a3 uint64
		s := words[j]
		k := 0
		for ; k+4 <= len(s); k += 4 {
			q := s[k : k+4 : k+4]
			a0 ^= q[0]
			a1 ^= q[1]
			a2 ^= q[2]
			a3 ^= q[3]
		}
		for _, v := range s[k:] {
			a0 ^= v
		}
		return a0 ^ a1 ^ a2 ^ a3
	})
}

// parallelEach runs f over [0, n) on all cores and folds the results into
// sink, so that no read is optimised away.
func parallelEach(n int, f func(int) uint64) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := make(chan int, n)
	for j := range n {
		next <- j
	}
	close(next)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Go(func() {
			var acc uint64
			for j := range next {
				acc ^= f(j)
			}
			mu.Lock()
			sink ^= acc
			mu.Unlock()
		})
	}
	wg.Wait()
}
