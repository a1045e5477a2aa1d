package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

func TestReadUserConfigRefusesWhatItCannotRead(t *testing.T) {
	for name, in := range map[string]string{
		"garbage":        "garbage{",
		"not an object":  "[1, 2]",
		"repeated key":   `{"pipelining_depth": 1, "pipelining_depth": 2}`,
		"surface broken": `{"schedule_config": 3}`,
		"no setting":     `{}`,
		"surface empty":  `{"schedule_config": {}}`,
		"only unknown":   `{"ir_version": "0.2.0", "tasks": []}`,
	} {
		if _, err := ReadUserConfig([]byte(in), true); !errors.Is(err, ErrConfigInput) {
			t.Errorf("%s: err = %v, want an ErrConfigInput", name, err)
		}
	}
}

func TestReadUserConfigNamesUnknownKeysWithWhatWasMeant(t *testing.T) {
	in := []byte(`{"tilling": {"gemv": {"N_tile": 512}}, "tiling": {"gemv": {"N_tlie": 128}}, "pipelining_depth": 2}`)
	_, err := ReadUserConfig(in, false)
	var uk *UnknownKeysError
	if !errors.As(err, &uk) || !errors.Is(err, ErrConfigInput) {
		t.Fatalf("err = %v, want an UnknownKeysError", err)
	}
	msg := err.Error()
	for _, want := range []string{`'tilling' (did you mean "tiling"?)`, `tiling['gemv']['N_tlie'] (did you mean "N_tile"?)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	cfg, err := ReadUserConfig(in, true)
	if err != nil || len(cfg.Ignored) != 2 {
		t.Fatalf("allowed: cfg.Ignored = %v, err = %v; want the two keys and no error", cfg.Ignored, err)
	}
}

func TestReadUserConfigTakesProposesAnswerAsItIs(t *testing.T) {
	target, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	inc, err := ParsePoint([]byte(`{"tiling": {"gemv": {"N_tile": 128}}, "pipelining_depth": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	surface := pyjson.Indent(Surface("small", target, DeviceCPU, inc))
	cfg, err := ReadUserConfig(surface, false)
	if err != nil {
		t.Fatalf("propose's answer refused: %v", err)
	}
	p, err := PointFromValue(cfg.Value)
	if err != nil || !cfg.FromSurface {
		t.Fatalf("point %v, from surface %v: %v", p, cfg.FromSurface, err)
	}
	if p.ID() != inc.ID() {
		t.Errorf("read %s from propose's answer, want the incumbent %s", p.ID(), inc.ID())
	}
}

func TestOffGridNotes(t *testing.T) {
	target, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePoint([]byte(`{"tiling": {"gemv": {"N_tile": 17}}}`))
	if err != nil {
		t.Fatal(err)
	}
	notes := OffGridNotes(p, target, DeviceCPU)
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "tiling.gemv.N_tile 17 is off the search grid (16, 32,") {
		t.Errorf("notes = %q, want one for N_tile 17", notes)
	}
	if notes := OffGridNotes(Default(), target, DeviceCPU); len(notes) != 0 {
		t.Errorf("the default point has off-grid notes: %q", notes)
	}
	onGrid, _ := ParsePoint([]byte(`{"tiling": {"gemv": {"N_tile": 128}}, "pipelining_depth": 4}`))
	if notes := OffGridNotes(onGrid, target, DeviceCPU); len(notes) != 0 {
		t.Errorf("an on-grid point has notes: %q", notes)
	}
}
