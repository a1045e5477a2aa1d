package mpk_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/validate"
)

// tileGraph is hand_mirage.json (an embedding, two projection tiles of y
// signalling one event, an argmax over y, a copy) with y reshaped to rows x
// cols and the tiles' output views (and weight rows) replaced: tile i
// writes columns [off[i], off[i]+n[i]) of every row, or of row one only
// when partial[i].
func tileGraph(t testing.TB, rows, cols int64, off, n [2]int64, partial [2]bool) *mpk.Graph {
	t.Helper()
	g := handMirageGraph(t)
	const bf16 = 941
	for i, task := range []int{3, 4} {
		tk := &g.Tasks[task]
		out := mpk.Tensor{BasePtr: "y", Offset: 2 * off[i], Dims: []int64{rows, n[i]}, Strides: []int64{cols, 1}, DataType: bf16}
		if partial[i] {
			out.Dims[0] = 1
		}
		tk.Outputs = []mpk.Tensor{out}
		tk.Inputs[1] = mpk.Tensor{BasePtr: "w", Offset: 2 * off[i] * 128, Dims: []int64{n[i], 128}, Strides: []int64{128, 1}, DataType: bf16}
	}
	g.Tasks[5].Inputs = []mpk.Tensor{{BasePtr: "y", Dims: []int64{rows, cols}, Strides: []int64{cols, 1}, DataType: bf16}}
	return g
}

// handMirageGraph decodes testdata/good/hand_mirage.json.
func handMirageGraph(t testing.TB) *mpk.Graph {
	t.Helper()
	g, err := mpk.Decode([]byte(handMirage(t)))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// wawBetween reports whether the validator names a write-after-write race
// on y between the two tiles (tasks 3 and 4).
func wawBetween(rep validate.Report) bool {
	for _, d := range rep.Errors {
		if d.Code == validate.CodeRaceWAW && strings.Contains(d.Message, "('y')") {
			return true
		}
	}
	return false
}

func overlapBetween(rep mpk.Report) bool {
	for _, f := range rep.Errors {
		if f.Code == mpk.CodeOverlap && strings.Contains(f.Message, "tasks 3 and 4") {
			return true
		}
	}
	return false
}

// TestImportKeepsViewRanges is the property test of the translation's
// views: for projection tiles of one tensor, amk's validator finds a
// write-after-write race on the imported program exactly when MPK's own
// byte-level check finds the two tiles' bytes overlapping. Tiles that
// write only some rows of their columns stay whole-buffer writes (a GEMV
// tile writes every row), so there the validator may only be stricter.
func TestImportKeepsViewRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 5))
	exact, checked := 0, 0
	for range 400 {
		rows := []int64{1, 2, 4}[rng.IntN(3)]
		cols := []int64{8, 16, 128}[rng.IntN(3)]
		var off, n [2]int64
		var partial [2]bool
		for k := range 2 {
			n[k] = 1 + rng.Int64N(cols)
			off[k] = rng.Int64N(cols - n[k] + 1)
			partial[k] = rows > 1 && rng.IntN(4) == 0
		}
		if rng.IntN(3) == 0 { // the tiles of a real projection: two halves
			n = [2]int64{cols / 2, cols / 2}
			off = [2]int64{0, cols / 2}
		}
		what := fmt.Sprintf("y [%d, %d], tile columns [%d, %d) and [%d, %d), row one only %v", rows, cols,
			off[0], off[0]+n[0], off[1], off[1]+n[1], partial)
		g := tileGraph(t, rows, cols, off, n, partial)
		mrep := mpk.Check(g, mpk.CheckOptions{Workers: 4, QueueLen: 64})
		p, err := mpk.ToProgram(g)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		vrep := validate.Validate(p)
		checked++
		mpkSays, amkSays := overlapBetween(mrep), wawBetween(vrep)
		switch {
		case mpkSays && !amkSays:
			t.Fatalf("%s: MPK's check finds the tiles overlapping, the import hides it:\n%s\n%s", what, mrep, vrep.String())
		case slices.Contains(partial[:], true):
			// a whole-buffer write: only soundness is promised
		case amkSays != mpkSays:
			t.Fatalf("%s: MPK's check says overlap=%v, the validator says WAW=%v:\n%s\n%s", what, mpkSays, amkSays, mrep, vrep.String())
		default:
			exact++
		}
	}
	t.Logf("%d graphs, %d with column tiles where the two checks agree exactly", checked, exact)
	if exact < checked/2 {
		t.Fatalf("only %d of %d graphs exercised the exact case", exact, checked)
	}
}

// TestImportOfDisjointTilesHasNoRace: hand_mirage.json's two tiles write
// the halves of y; the imported program has no race (it used to be a
// write-after-write race on the whole of y).
func TestImportOfDisjointTilesHasNoRace(t *testing.T) {
	g := handMirageGraph(t)
	p, err := mpk.ToProgram(g)
	if err != nil {
		t.Fatal(err)
	}
	rep := validate.Validate(p)
	for _, code := range []string{validate.CodeRaceWAW, validate.CodeRaceRAW, validate.CodeTileCoverage} {
		if rep.Has(code) {
			t.Fatalf("%s on the import of two disjoint tiles:\n%s", code, rep.String())
		}
	}
	// The round trip still gives the graph back.
	back, err := mpk.ToGraph(p, mpk.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(mpk.Encode(back)) != string(mpk.Encode(g)) {
		t.Fatal("the imported program no longer exports the graph it came from")
	}
}
