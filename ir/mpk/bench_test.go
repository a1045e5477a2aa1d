package mpk_test

import (
	"testing"

	"github.com/amk-dev/amk/ir/mpk"
)

// BenchmarkCheckLlama1B: the checker on amk's export of llama-1b.
func BenchmarkCheckLlama1B(b *testing.B) {
	g, err := mpk.ToGraph(lowered(b, "llama-1b"), mpk.ExportOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if rep := mpk.Check(g, mpk.CheckOptions{}); !rep.OK {
			b.Fatal(rep)
		}
	}
}

// BenchmarkDecodeLlama1B: decoding amk's export of llama-1b.
func BenchmarkDecodeLlama1B(b *testing.B) {
	data := exported(b, lowered(b, "llama-1b"))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		if _, err := mpk.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
