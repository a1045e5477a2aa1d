package flywheel

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/amk-dev/amk/pyjson"
)

// followed checks that the follower's view of the corpus is exactly what a
// full read gives.
func followed(t *testing.T, c *CorpusFollower, path, when string) []Record {
	t.Helper()
	got, gotSkipped, err := c.Records()
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	want, wantSkipped, err := ReadCorpus(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) || gotSkipped != wantSkipped {
		t.Fatalf("%s: follower has %d records (%d skipped), a full read %d (%d skipped)", when, len(got), gotSkipped, len(want), wantSkipped)
	}
	return got
}

func appendBytes(t *testing.T, path string, b string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCorpusFollowerMatchesAFullRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "corpus.jsonl")
	c := NewCorpusFollower(path)
	followed(t, c, path, "missing file")
	if err := AppendCorpus(path, sampleRecord(10), sampleRecord(11)); err != nil {
		t.Fatal(err)
	}
	followed(t, c, path, "first read")
	if err := AppendCorpus(path, sampleRecord(12)); err != nil {
		t.Fatal(err)
	}
	followed(t, c, path, "after an append")
	appendBytes(t, path, "not json\n{\"model\": \"torn")
	followed(t, c, path, "a malformed line and a torn one")
	appendBytes(t, path, "\"}\n")
	followed(t, c, path, "the torn line completed (malformed)")
	if err := AppendCorpus(path, sampleRecord(13)); err != nil {
		t.Fatal(err)
	}
	followed(t, c, path, "append after the malformed lines")

	// Replaced by another file (a rename over it): read again.
	other := filepath.Join(dir, "other.jsonl")
	if err := AppendCorpus(other, sampleRecord(20)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	followed(t, c, path, "replaced")

	// Rewritten in place with other content at least as long: read again.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := AppendCorpus(other, sampleRecord(30)); err != nil {
		t.Fatal(err)
	}
	rewrite, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if len(rewrite) < len(data) {
		t.Fatalf("fixture: the rewrite (%d bytes) is shorter than the file (%d)", len(rewrite), len(data))
	}
	if err := os.WriteFile(path, append(rewrite, data...), 0o644); err != nil {
		t.Fatal(err)
	}
	followed(t, c, path, "rewritten in place")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	followed(t, c, path, "truncated")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	followed(t, c, path, "removed")
}

// Once read, the corpus costs a follower nothing to hand out again: its
// allocations do not grow with the corpus (a full read allocates per line).
func TestCorpusFollowerDoesNotReparse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corpus.jsonl")
	recs := make([]Record, 2000)
	for i := range recs {
		recs[i] = sampleRecord(float64(10 + i))
	}
	if err := AppendCorpus(path, recs...); err != nil {
		t.Fatal(err)
	}
	c := NewCorpusFollower(path)
	followed(t, c, path, "first read")
	allocs := testing.AllocsPerRun(20, func() {
		if got, _, err := c.Records(); err != nil || len(got) != len(recs) {
			t.Fatalf("%d records, %v", len(got), err)
		}
	})
	if allocs > 20 {
		t.Fatalf("%v allocations to hand out an unchanged corpus of %d records", allocs, len(recs))
	}
	if err := AppendCorpus(path, sampleRecord(1)); err != nil {
		t.Fatal(err)
	}
	got := followed(t, c, path, "after an append")
	if len(got) != len(recs)+1 {
		t.Fatalf("%d records after the append", len(got))
	}
}

// FuzzCorpusFollower: whatever two writes put in a corpus file, the
// follower, reading after each, agrees with a full read.
func FuzzCorpusFollower(f *testing.F) {
	var seed bytes.Buffer
	for _, lat := range []float64{10, 11} {
		r := sampleRecord(lat)
		seed.WriteString(pyjson.Compact(r.Value(), false))
		seed.WriteByte('\n')
	}
	line := seed.String()
	f.Add(line[:len(line)/2], line[len(line)/2:])
	f.Add("not json\n{", "\"model\": 1}\n")
	f.Add("", "\n\n")
	f.Fuzz(func(t *testing.T, first, second string) {
		if len(first)+len(second) > 1<<16 {
			return
		}
		path := filepath.Join(t.TempDir(), "corpus.jsonl")
		c := NewCorpusFollower(path)
		appendBytes(t, path, first)
		followed(t, c, path, "after the first write")
		appendBytes(t, path, second)
		followed(t, c, path, "after the second write")
	})
}
