package trial

import (
	"runtime"
	"sync"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/validate"
)

// BenchmarkDecodeStep compares, in one run, the reference VM's decode step
// on the real lowering of the canonical default schedule, the eager oracle's
// step, and the physical floor: reading the weights once from memory on
// every core, in the float32 storage both of them read.
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
		bytes := float64(lm.Config.NumParams() * 4)
		b.Run(name+"/reference-vm", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := RunStep(prog, lm.Weights, DefaultToken, 0, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/reference-vm-float32-weights", func(b *testing.B) {
			plain := withoutMirrors(lm.Weights) // the VM as it read weights before the bf16 mirrors
			for i := 0; i < b.N; i++ {
				if _, err := RunStep(prog, plain, DefaultToken, 0, nil); err != nil {
					b.Fatal(err)
				}
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
		b.Run(name+"/weight-read-floor", func(b *testing.B) {
			var slices [][]float32
			for _, t := range lm.Weights {
				slices = append(slices, t.F)
			}
			b.SetBytes(int64(bytes))
			for i := 0; i < b.N; i++ {
				sumAll(slices)
			}
		})
	}
}

var sink float32

// BenchmarkWeightReadStored is the floor at the weights' stored width: one
// read of every bf16 mirror (2 bytes per weight) of small, on all cores.
func BenchmarkWeightReadStored(b *testing.B) {
	lm, err := NewModelCache(0).Get("small", "")
	if err != nil {
		b.Fatal(err)
	}
	var words [][]uint64
	var n int64
	for _, t := range lm.Weights {
		if len(t.BF16) > 0 {
			words = append(words, t.BF16)
			n += int64(8 * len(t.BF16))
		}
	}
	b.SetBytes(n)
	for i := 0; i < b.N; i++ {
		parallelEach(len(words), func(j int) float32 {
			var a0, a1 uint64
			s := words[j]
			k := 0
			for ; k+2 <= len(s); k += 2 {
				a0 ^= s[k]
				a1 ^= s[k+1]
			}
			return float32(a0 ^ a1)
		})
	}
}

// parallelEach runs f over [0, n) on all cores and adds the results to sink.
func parallelEach(n int, f func(int) float32) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := make(chan int, n)
	for j := 0; j < n; j++ {
		next <- j
	}
	close(next)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var acc float32
			for j := range next {
				acc += f(j)
			}
			mu.Lock()
			sink += acc
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// sumAll reads every value once, spread over all cores.
func sumAll(slices [][]float32) {
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := make(chan []float32, len(slices))
	for _, s := range slices {
		next <- s
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a0, a1, a2, a3 float32
			for s := range next {
				i := 0
				for ; i+4 <= len(s); i += 4 {
					a0 += s[i]
					a1 += s[i+1]
					a2 += s[i+2]
					a3 += s[i+3]
				}
				for ; i < len(s); i++ {
					a0 += s[i]
				}
			}
			mu.Lock()
			sink += a0 + a1 + a2 + a3
			mu.Unlock()
		}()
	}
	wg.Wait()
}
