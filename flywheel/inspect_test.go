package flywheel

import (
	"os"
	"strings"
	"testing"

	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
)

func recordID(r Record) string {
	p, err := schedule.PointFromValue(r.Schedule)
	if err != nil {
		return ""
	}
	return p.ID()
}

// TestImportReferenceStateAndResults: AMK's orchestration state gives its
// best point as a corpus record, AMK's results.tsv reads as rows, and the
// two join by schedule id (the seed-001 cfg.json is sch_35332a9ac1 in both).
func TestImportReferenceStateAndResults(t *testing.T) {
	data, err := os.ReadFile("testdata/amk_orchestration_state.json")
	if err != nil {
		t.Fatal(err)
	}
	st, rec, ok, err := ImportReferenceState(data)
	if err != nil || !ok {
		t.Fatalf("import: ok=%v err=%v", ok, err)
	}
	if st.Status != "done" || rec.Model != "toy(1L)" || rec.GPU != "rtx5090" || rec.LatencyUS != 24.31 ||
		rec.PctOfRoofline != 7800 || rec.LatencyKind != KindPredicted || rec.BoundUS <= 0 {
		t.Fatalf("state %+v record %+v", st, rec)
	}
	if id := recordID(rec); id != "sch_35332a9ac1" {
		t.Errorf("imported best config has id %s, want the reference's sch_35332a9ac1", id)
	}
	rows, err := ReadRows("testdata/amk_results.tsv")
	if err != nil || len(rows) != 3 {
		t.Fatalf("AMK results.tsv: %d rows, %v", len(rows), err)
	}
	s := Summarize([]Record{rec}, recordID, rows)
	if s.CorpusRecords != 1 || s.Rows != 3 || s.JoinedRows != 1 || s.RowsByTag["rejected"] != 1 || len(s.Groups) != 1 {
		t.Fatalf("summary %+v", s)
	}
	if txt := s.Text(); !strings.Contains(txt, "3 experiment rows (kept 1, rejected 1, revert 1); 1 join") {
		t.Errorf("summary text:\n%s", txt)
	}
	for _, bad := range []string{`{}`, `[1]`, `{"model": "x", "gpu": "y"}`, `{"model": "x", "gpu": "y", "experiments_run": 1, "model": "z"}`} {
		if _, _, _, err := ImportReferenceState([]byte(bad)); err == nil {
			t.Errorf("%s: imported without an error", bad)
		}
	}
	none := strings.Replace(string(data), `"best_us": 24.31`, `"best_us": null`, 1)
	if _, _, ok, err := ImportReferenceState([]byte(none)); err != nil || ok {
		t.Errorf("a state without a best: ok=%v err=%v", ok, err)
	}
}

func TestMergeCorpus(t *testing.T) {
	f, err := os.Open("testdata/reference_corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, _, err := ImportReference(f)
	if err != nil || len(recs) < 2 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	add, dup := MergeCorpus(recs[:1], recs, recs)
	if len(add) != len(recs)-1 || dup != len(recs)+1 {
		t.Fatalf("merge added %d (want %d), duplicates %d (want %d)", len(add), len(recs)-1, dup, len(recs)+1)
	}
}

func FuzzImportReferenceState(f *testing.F) {
	if data, err := os.ReadFile("testdata/amk_orchestration_state.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"model": "m", "gpu": "h100", "experiments_run": 0, "best_us": 1e300, "best_config": {}, "best_pct_roofline": -1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, rec, ok, err := ImportReferenceState(data)
		if ok && (err != nil || rec.Check() != nil) {
			t.Fatalf("imported an invalid record: %v %v", err, rec.Check())
		}
	})
}

func TestParseAnyCorpus(t *testing.T) {
	ref, err := os.ReadFile("testdata/reference_corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	refRecs, _, _ := ImportReference(strings.NewReader(string(ref)))
	var amk []byte
	for i := range refRecs {
		amk = append(amk, pyjsonLine(refRecs[i])...)
	}
	mixed := append(append(append([]byte{}, ref...), amk...), []byte("not json\n")...)
	recs, skipped := ParseAnyCorpus(mixed)
	if len(recs) != 2*len(refRecs) || skipped < 1 {
		t.Fatalf("%d records (want %d), %d skipped", len(recs), 2*len(refRecs), skipped)
	}
}

func pyjsonLine(r Record) []byte { return []byte(pyjson.Compact(r.Value(), false) + "\n") }
