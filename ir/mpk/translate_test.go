package mpk_test

import (
	"bytes"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// lowered is the program amk lowers for a preset on h100 at the default point.
func lowered(t testing.TB, preset string) *ir.Program {
	t.Helper()
	cfg, err := model.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	target, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	p, err := schedule.Lower(cfg, target, schedule.Default(), schedule.LowerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func exported(t testing.TB, p *ir.Program) []byte {
	t.Helper()
	g, err := mpk.ToGraph(p, mpk.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mpk.Encode(g)
}

// amk -> MPK -> amk gives the program back byte for byte, through the file.
func TestAMKRoundTripIsByteIdentical(t *testing.T) {
	for _, preset := range []string{"toy", "small", "llama-1b"} {
		t.Run(preset, func(t *testing.T) {
			p := lowered(t, preset)
			want := ir.Encode(p)
			g, err := mpk.Decode(exported(t, p))
			if err != nil {
				t.Fatal(err)
			}
			back, err := mpk.ToProgram(g)
			if err != nil {
				t.Fatal(err)
			}
			if got := ir.Encode(back); !bytes.Equal(got, want) {
				t.Fatalf("round trip differs:\n%s", firstDiff(got, want))
			}
		})
	}
}

func firstDiff(a, b []byte) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			lo := max(0, i-200)
			return "got:  ..." + string(a[lo:min(len(a), i+100)]) + "\nwant: ..." + string(b[lo:min(len(b), i+100)])
		}
	}
	return "lengths differ"
}
