package flywheel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/pyjson"
)

func sampleRecord(lat float64) Record {
	sched, err := pyjson.Parse([]byte(`{"tiling": {"gemv": {"N_tile": 64}}, "pipelining_depth": 2, "kernel_knobs": {"cpasync": 1}}`))
	if err != nil {
		panic(err)
	}
	return Record{
		Model: "toy", GPU: "h200", Regime: RegimeSingle, Correctness: CorrectPass,
		LatencyUS: lat, BoundUS: 0.5, PctOfRoofline: lat / 0.5 * 100, Schedule: sched,
		IRVersion: "0.2.0", ABIVersion: "0.2", Notes: "autoresearch kept; default; kind=predicted\ttab",
		TS: 1780000000.25, LatencyKind: KindPredicted,
		Shape:       Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256},
		ShapeSource: ShapeFromConfig,
		Env:         Env{Target: "h200", Device: "cpu", DeviceName: "host-1", AMKVersion: "dev"},
	}
}

func TestCorpusRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flywheel", "corpus.jsonl")
	a, b := sampleRecord(30), sampleRecord(25.5)
	if err := AppendCorpus(path, a); err != nil {
		t.Fatal(err)
	}
	if err := AppendCorpus(path, b); err != nil {
		t.Fatal(err)
	}
	// A malformed line from some other writer and a torn tail.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{\"model\": \"x\"}\n{\"model\": \"torn")
	f.Close()
	recs, skipped, err := ReadCorpus(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || skipped != 1 {
		t.Fatalf("%d records, %d skipped; want 2, 1", len(recs), skipped)
	}
	for i, want := range []Record{a, b} {
		got, exp := pyjson.Compact(recs[i].Value(), false), pyjson.Compact(want.Value(), false)
		if got != exp {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, exp)
		}
	}
	line := pyjson.Compact(a.Value(), false)
	for _, key := range []string{`"model": "toy"`, `"bound_us": 0.5`, `"latency_kind": "predicted"`, `"model_shape": {"hidden": 64`, `"env": {"target": "h200"`} {
		if !strings.Contains(line, key) {
			t.Errorf("record line lacks %s: %s", key, line)
		}
	}
	// Appending repairs the torn tail.
	if err := AppendCorpus(path, a); err != nil {
		t.Fatal(err)
	}
	recs, skipped, _ = ReadCorpus(path)
	if len(recs) != 3 || skipped != 1 {
		t.Fatalf("after repair: %d records, %d skipped", len(recs), skipped)
	}
}

func TestCorpusRefusesBadRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corpus.jsonl")
	mutate := []func(*Record){
		func(r *Record) { r.Correctness = CorrectFail },
		func(r *Record) { r.BoundUS = 0 },
		func(r *Record) { r.LatencyUS = -1 },
		func(r *Record) { r.LatencyKind = "guess" },
		func(r *Record) { r.Schedule = pyjson.StringValue("x") },
	}
	for i, m := range mutate {
		r := sampleRecord(10)
		m(&r)
		if err := AppendCorpus(path, r); err == nil {
			t.Errorf("bad record %d accepted", i)
		}
	}
}

// ImportReferenceFile appends the usable lines of a reference corpus to an
// amk corpus and counts the rest; a missing file is an error and appends
// nothing.
func TestImportReferenceFile(t *testing.T) {
	corpus := filepath.Join(t.TempDir(), "corpus.jsonl")
	if err := AppendCorpus(corpus, sampleRecord(1)); err != nil {
		t.Fatal(err)
	}
	n, skipped, err := ImportReferenceFile(corpus, "testdata/reference_corpus.jsonl")
	if err != nil || n != 4 || skipped != 5 {
		t.Fatalf("imported %d, skipped %d, err %v; want 4, 5, nil", n, skipped, err)
	}
	back, bad, err := ReadCorpus(corpus)
	if err != nil || bad != 0 || len(back) != 5 {
		t.Fatalf("corpus after import: %d records, %d bad, err %v; want 5 (1 before + 4)", len(back), bad, err)
	}
	if _, _, err := ImportReferenceFile(corpus, filepath.Join(t.TempDir(), "missing.jsonl")); err == nil {
		t.Error("a missing reference corpus was accepted")
	}
	if again, _, _ := ReadCorpus(corpus); len(again) != 5 {
		t.Errorf("a failed import changed the corpus: %d records", len(again))
	}
}

func TestImportReference(t *testing.T) {
	f, err := os.Open("testdata/reference_corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, skipped, err := ImportReference(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || skipped != 5 {
		t.Fatalf("%d records, %d skipped; want 4, 5", len(recs), skipped)
	}
	toy, small, llama, shaped := recs[0], recs[1], recs[2], recs[3]
	if toy.LatencyKind != KindPredicted || toy.ShapeSource != ShapeFromNameRegex || toy.Shape != (Shape{NLayers: 1}) {
		t.Errorf("toy: %+v", toy)
	}
	if small.LatencyKind != KindMeasuredGPU || small.Shape != (Shape{Hidden: 2048, NLayers: 4}) {
		t.Errorf("small: kind %s shape %+v", small.LatencyKind, small.Shape)
	}
	if small.BoundUS != 300 { // 900 µs at 300 % of the floor
		t.Errorf("small: derived bound %v, want 300", small.BoundUS)
	}
	if llama.LatencyKind != KindMeasuredGPU || llama.Shape.Hidden != 2048 || llama.Shape.NLayers != 16 {
		t.Errorf("llama: %+v", llama)
	}
	if s := pyjson.Compact(llama.Schedule, false); strings.Contains(s, "dtype") || strings.Contains(s, "weight_mb") {
		t.Errorf("llama schedule kept non-config keys: %s", s)
	}
	if shaped.ShapeSource != ShapeFromSchedule || shaped.Shape.NKVHeads != 2 || shaped.PctOfRoofline != 5000 {
		t.Errorf("shaped: %+v", shaped)
	}
	if s := pyjson.Compact(shaped.Schedule, false); s != `{"pipelining_depth": 0}` {
		t.Errorf("shaped schedule: %s", s)
	}
	// Imported records are valid amk records: they can be appended and read back.
	path := filepath.Join(t.TempDir(), "corpus.jsonl")
	if err := AppendCorpus(path, recs...); err != nil {
		t.Fatal(err)
	}
	back, skipped, err := ReadCorpus(path)
	if err != nil || skipped != 0 || len(back) != 4 {
		t.Fatalf("read back %d, skipped %d, err %v", len(back), skipped, err)
	}
}

func TestShapeFromName(t *testing.T) {
	cases := map[string]Shape{
		"small(4L/2048h)":                      {Hidden: 2048, NLayers: 4},
		"llama-1B-shape(2048h/16L/128k-vocab)": {Hidden: 2048, NLayers: 16},
		"toy(2L)":                              {NLayers: 2},
		"toy":                                  {},
	}
	for name, want := range cases {
		if got := ShapeFromName(name); got != want {
			t.Errorf("ShapeFromName(%q) = %+v, want %+v", name, got, want)
		}
	}
}
