package flywheel

import (
	"path/filepath"
	"testing"
)

// BenchmarkAppendRow is one locked, fsynced results.tsv append.
func BenchmarkAppendRow(b *testing.B) {
	path := filepath.Join(b.TempDir(), "results.tsv")
	r := Row{Experiment: 1, Tag: TagKept, Loop: LoopSchedule, Correctness: CorrectPass, LatencyUS: new(123.4),
		Description: "mutate: kept\twith a tab; kind=predicted"}
	for i := 0; i < b.N; i++ {
		r.Experiment = i
		if err := AppendRows(path, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRank ranks a pool of 12 candidates against 1000 examples.
func BenchmarkRank(b *testing.B) {
	ex, _ := randomExamples(1000, 5)
	_, cands := randomExamples(12, 6)
	r := NewRanker(ex)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Rank(toyShape, cands)
	}
}
