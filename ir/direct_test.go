package ir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/amk-dev/amk/pyjson"
)

// corpus is every program file under ir/testdata and validate/testdata.
func corpus(t testing.TB) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, root := range []string{"testdata", filepath.Join("..", "validate", "testdata")} {
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			files[path] = data
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 10 {
		t.Fatalf("only %d files under testdata", len(files))
	}
	return files
}

// sameDecoding fails unless whatever the direct decoder accepts, the tree
// decoder accepts as an equal Program, and Decode returns it. (Where the
// direct decoder gives up, Decode is the tree decoder by construction.)
func sameDecoding(t *testing.T, data []byte, lim Limits) {
	t.Helper()
	lim = lim.withDefaults()
	direct, ok, bug := decodeDirectChecked(data, lim, nil)
	if bug != nil {
		t.Fatalf("direct decoder panicked: %v\n%.400s", bug, data)
	}
	if !ok {
		return
	}
	want, err := decodeTree(data, lim)
	if err != nil {
		t.Fatalf("direct decoder accepts what the tree decoder refuses (%v):\n%.400s", err, data)
	}
	if !reflect.DeepEqual(direct, want) {
		t.Fatalf("direct and tree decoders differ:\n%#v\n---\n%#v", direct, want)
	}
	if got, err := DecodeLimited(data, lim); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode does not return the direct decoder's Program (error %v)", err)
	}
}

func TestDirectDecoderMatchesTreeDecoderOnTestdata(t *testing.T) {
	for path, data := range corpus(t) {
		t.Run(path, func(t *testing.T) {
			sameDecoding(t, data, Limits{})
			sameDecoding(t, data, Limits{MaxItems: 3})
		})
	}
}

// The direct decoder must take the programs amk writes itself, or Decode
// silently falls back to the slow path.
func TestDirectDecoderTakesEncodedPrograms(t *testing.T) {
	accepted := 0
	for path, data := range corpus(t) {
		p, err := decodeTree(data, Limits{}.withDefaults())
		if err != nil {
			continue
		}
		enc := Encode(p)
		if _, ok := decodeDirect(enc, Limits{}.withDefaults()); !ok {
			t.Errorf("%s: the direct decoder gives up on its own encoding", path)
		}
		accepted++
	}
	if accepted == 0 {
		t.Fatal("no program in testdata decodes")
	}
}

func TestDirectDecoderGivesUpOnWhatItDoesNotHandle(t *testing.T) {
	base := `{"ir_version": "0.2.0", "tasks": [{"id": 0, "op": "GEMV_TILE", "inputs": [], "outputs": [0], "out_counter": 0%s}]}`
	for _, extra := range []string{
		`, "label": "caf\u00e9"`, // escape
		`, "label": "é"`,         // non-ASCII
		`, "est_bytes": 1.0`,     // float for an int
		`, "id": 1`,              // repeated key
		`, "colour": 1`,          // unknown key
		`, "est_bytes": 9007199254740993`,
		`, "params": {"a": 1, "a": 2}`,
		`, "params": {"a": {"b": 1, "b": 2}}`,
	} {
		doc := fmt.Appendf(nil, base, extra)
		if _, ok := decodeDirect(doc, Limits{}.withDefaults()); ok {
			t.Errorf("direct decoder accepted %s", doc)
		}
		sameDecoding(t, doc, Limits{})
	}
	if _, ok := decodeDirect(fmt.Appendf(nil, base, `, "params": {"a": -0, "b": "x", "c": [1.5]}`), Limits{}.withDefaults()); !ok {
		t.Error("direct decoder gave up on plain params")
	}
}

// FuzzDirectDecode is the differential target: the direct decoder against
// the tree decoder (an equal Program, or Decode's error text equal to the
// tree decoder's), on the seeds of FuzzDecode and every testdata program,
// with a fuzzed item limit.
func FuzzDirectDecode(f *testing.F) {
	for _, data := range corpus(f) {
		f.Add(data, uint16(0))
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), uint16(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxItems uint16) {
		lim := Limits{MaxItems: int(maxItems)}
		sameDecoding(t, data, lim)
		got, gotErr := DecodeLimited(data, lim)
		want, wantErr := decodeTree(data, lim.withDefaults())
		switch {
		case (gotErr == nil) != (wantErr == nil):
			t.Fatalf("Decode error %v, tree decoder error %v", gotErr, wantErr)
		case gotErr != nil && gotErr.Error() != wantErr.Error():
			t.Fatalf("Decode error %q, tree decoder error %q", gotErr, wantErr)
		case !reflect.DeepEqual(got, want):
			t.Fatal("Decode and the tree decoder differ")
		}
	})
}

// TestDirectDecoderOnByteMutations runs the differential check on every
// one-byte deletion, and on a set of one-byte replacements and insertions,
// of small programs covering each part of the format (the fuzzer reaches
// such near-valid documents only slowly).
func TestDirectDecoderOnByteMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("several seconds")
	}
	files := []string{
		"testdata/seed_example.json",
		filepath.Join("..", "validate", "testdata", "good", "pages_separated_live_ranges.json"),
	}
	bytesTried := []byte(`0-."\,:{}[]n` + "\xc3")
	for _, file := range files {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc = Encode(mustDecode(t, doc))
		mutant := make([]byte, 0, len(doc)+1)
		for i := range doc {
			if i > 0 && doc[i] == ' ' && doc[i-1] == ' ' {
				continue // inside an indentation: the same as its first byte
			}
			mutant = append(append(mutant[:0], doc[:i]...), doc[i+1:]...)
			sameDecoding(t, mutant, Limits{})
			for _, c := range bytesTried {
				mutant = append(append(append(mutant[:0], doc[:i]...), c), doc[i+1:]...)
				sameDecoding(t, mutant, Limits{})
				mutant = append(append(append(mutant[:0], doc[:i]...), c), doc[i:]...)
				sameDecoding(t, mutant, Limits{})
			}
		}
	}
}

func mustDecode(t *testing.T, data []byte) *Program {
	t.Helper()
	p, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sampledProgram has n tasks; the first `first` of them carry heavy (long
// labels, many ints, waits and params) or light contents, the rest the
// other kind, so that the sizes the direct decoder takes from its sample of
// the first tasks are too large or too small for the rest.
func sampledProgram(n, first int, heavyFirst bool) *Program {
	p := &Program{IRVersion: IRVersion, ABIVersion: ABIVersion, Meta: pyjson.ObjectValue()}
	for i := range n {
		heavy := (i < first) == heavyFirst
		t := Task{ID: i, Op: OpGEMVTile, Inputs: []int{i}, Outputs: []int{i + 1}, OutCounter: i,
			Waits: []Wait{}, Params: Params{IntParam("n", int64(i))}, Label: fmt.Sprint("t", i)}
		if heavy {
			for j := range 9 {
				t.Inputs = append(t.Inputs, i+j)
				t.Waits = append(t.Waits, Wait{Counter: j, Threshold: i})
				t.Params = append(t.Params, IntParam(fmt.Sprint("k", j), int64(j)))
			}
			t.Label = fmt.Sprintf("%0200d", i)
			sm := i % 7
			t.SM = &sm
		}
		p.Tasks = append(p.Tasks, t)
	}
	return p
}

// The direct decoder sizes its task slice and chunks from the first
// sampleTasks tasks; programs around that count, and programs whose later
// tasks are larger or smaller than the sample, indented and compact, decode
// as the tree decoder does.
func TestDirectDecoderSizesFromSample(t *testing.T) {
	for _, n := range []int{sampleTasks - 1, sampleTasks, sampleTasks + 1, 4 * sampleTasks} {
		for _, heavyFirst := range []bool{true, false} {
			doc := Encode(sampledProgram(n, sampleTasks, heavyFirst))
			var compact bytes.Buffer
			if err := json.Compact(&compact, doc); err != nil {
				t.Fatal(err)
			}
			for _, data := range [][]byte{doc, compact.Bytes()} {
				if _, ok := decodeDirect(data, Limits{}.withDefaults()); !ok {
					t.Errorf("%d tasks: the direct decoder gives up", n)
				}
				sameDecoding(t, data, Limits{})
				sameDecoding(t, data, Limits{MaxItems: n - 1})
			}
		}
	}
}

func TestDecodePlain(t *testing.T) {
	doc := Encode(sampledProgram(3, 1, true))
	p, ok := DecodePlain(doc, Limits{}, nil)
	if !ok || !reflect.DeepEqual(p, mustDecode(t, doc)) {
		t.Fatal("DecodePlain does not give Decode's program for amk's own encoding")
	}
	for _, doc := range []string{
		`{"all_tasks": [], "ir_version": "0.2.0", "tasks": []}`, // an unknown key, as a task graph has
		`{"ir_version": "0.2.0", "tasks": [}`,
		`{"tasks": []}`, // no ir_version
	} {
		if _, ok := DecodePlain([]byte(doc), Limits{}, nil); ok {
			t.Errorf("DecodePlain accepted %s", doc)
		}
	}
	if _, ok := DecodePlain(doc, Limits{MaxBytes: int64(len(doc) - 1)}, nil); ok {
		t.Error("DecodePlain ignored MaxBytes")
	}
}

// DecodePlain's done callback: what it reports as no longer needed is
// overwritten at once, and the program still comes out as Decode's.
func TestDecodePlainDone(t *testing.T) {
	doc := Encode(sampledProgram(12000, 6000, true)) // several MiB
	want := mustDecode(t, doc)
	data := bytes.Clone(doc)
	calls, last := 0, 0
	p, ok := DecodePlain(data, Limits{}, func(n int) {
		if n < last || n > len(data) {
			t.Fatalf("done(%d) after done(%d), %d bytes", n, last, len(data))
		}
		clear(data[:n])
		calls, last = calls+1, n
	})
	if !ok || !reflect.DeepEqual(p, want) {
		t.Fatal("DecodePlain with its done prefix cleared differs from Decode")
	}
	if calls < len(doc)>>20-1 {
		t.Errorf("done called %d times on %d bytes", calls, len(doc))
	}
}
