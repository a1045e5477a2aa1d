package pipeline

import "testing"

func BenchmarkCheck4Wave(b *testing.B) {
	s := Seed4Wave.Schedule()
	for b.Loop() {
		Check(s)
	}
}

func BenchmarkSimulate4Wave(b *testing.B) {
	s := Seed4Wave.Schedule()
	tg := target(b, "mi355x")
	for b.Loop() {
		if _, err := Simulate(s, tg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTune(b *testing.B) {
	tg := target(b, "mi355x")
	for b.Loop() {
		if _, err := Tune(tg, 0); err != nil {
			b.Fatal(err)
		}
	}
}
