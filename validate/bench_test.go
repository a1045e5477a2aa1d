package validate

import (
	"testing"

	"github.com/amk-dev/amk/internal/cputime"
)

func benchValidate(b *testing.B, s decodeShape) {
	p := buildDecode(s)
	if rep := Validate(p); !rep.OK {
		b.Fatalf("benchmark program rejected: %s", rep.Reason(3))
	}
	b.ReportAllocs()
	cpu0, cpuOK := cputime.Total()
	b.ResetTimer()
	for b.Loop() {
		Validate(p)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(p.Tasks)), "ns/task")
	if cpu1, ok := cputime.Total(); ok && cpuOK {
		// CPU time (GC included) is what the validator costs on a loaded
		// machine, where wall time also counts waiting for a core.
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
	}
	b.ReportMetric(float64(len(p.Tasks)), "tasks")
}

func withPages(s decodeShape) decodeShape { s.pages = true; return s }

// 2 layers: 986 tasks; 32 layers: 14,786 (the reference's 8B shape); 217
// layers: 99,886.
func BenchmarkValidate1k(b *testing.B)        { benchValidate(b, llama8B(2)) }
func BenchmarkValidate15k(b *testing.B)       { benchValidate(b, llama8B(32)) }
func BenchmarkValidate100k(b *testing.B)      { benchValidate(b, llama8B(217)) }
func BenchmarkValidate15kPages(b *testing.B)  { benchValidate(b, withPages(llama8B(32))) }
func BenchmarkValidate100kPages(b *testing.B) { benchValidate(b, withPages(llama8B(217))) }
