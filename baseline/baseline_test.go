package baseline

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/model"
)

func toy2L(t *testing.T) (model.Config, model.Weights) {
	t.Helper()
	cfg, err := model.Preset("toy-2L")
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitWeights(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, w
}

// roundTrip writes f as JSON (as the Python baseline does) and reads it back.
func roundTrip(t *testing.T, f *File) *File {
	t.Helper()
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func TestAmksOwnDecodePasses(t *testing.T) {
	cfg, w := toy2L(t)
	f, err := FromEager(cfg, w, []int32{1, 2, 3}, 8, "toy-2L")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Inputs) != 10 || len(f.Logits) != 10 || f.Inputs[2] != 3 {
		t.Fatalf("inputs %v", f.Inputs)
	}
	rep, err := Check(roundTrip(t, f), cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass || rep.ArgmaxAgree != 10 || len(rep.Steps) != 10 || rep.Steps[9].MaxAbsErr != 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestAnotherModelFails(t *testing.T) {
	cfg, w := toy2L(t)
	f, err := FromEager(cfg, w, []int32{5}, 4, "toy-2L")
	if err != nil {
		t.Fatal(err)
	}
	// Same shape, other weights: a look-alike.
	other, err := model.InitWeights(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(roundTrip(t, f), cfg, other)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass || !strings.Contains(rep.Reason, "positions 0, 1, 2, 3") {
		t.Fatalf("a look-alike passed: %+v", rep)
	}
	// One logit pushed past the tolerance at one position.
	f.Logits[2][7] += 0.5
	rep, err = Check(roundTrip(t, f), cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass || !strings.Contains(rep.Reason, "positions 2") || rep.Steps[2].Pass || !rep.Steps[1].Pass {
		t.Fatalf("a perturbed row passed: %+v", rep)
	}
}

func TestReadRefusesMalformedFiles(t *testing.T) {
	cfg, w := toy2L(t)
	good, _ := FromEager(cfg, w, []int32{1}, 2, "toy-2L")
	for name, edit := range map[string]func(f *File){
		"format":       func(f *File) { f.Format = "v0" },
		"rows":         func(f *File) { f.Logits = f.Logits[:1] },
		"prompt":       func(f *File) { f.Prompt = []int32{9} },
		"empty prompt": func(f *File) { f.Prompt = nil },
		"ragged":       func(f *File) { f.Logits[1] = f.Logits[1][:3] },
	} {
		f := *good
		f.Logits = append([][]float32(nil), good.Logits...)
		edit(&f)
		data, _ := json.Marshal(&f)
		if _, err := Read(bytes.NewReader(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Read(strings.NewReader(`{"format": "amk-baseline-v1", "inputs": [1], "logits": [[NaN]]}`)); err == nil {
		t.Error("NaN accepted")
	}
	// A file for another vocabulary or out-of-range tokens is an error, not a FAIL.
	f := *good
	f.Inputs = []int32{1, int32(cfg.Vocab)}
	if _, err := Check(&f, cfg, w); err == nil {
		t.Error("token outside the vocabulary accepted")
	}
	f = *good
	f.Logits = [][]float32{{1, 2}, {3, 4}}
	if _, err := Check(&f, cfg, w); err == nil {
		t.Error("wrong vocabulary accepted")
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"format": "amk-baseline-v1", "prompt": [1], "inputs": [1, 2], "logits": [[0.5, 1], [2, 3]]}`))
	f.Add([]byte(`{"format": "amk-baseline-v1", "inputs": [], "logits": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(file.Inputs) == 0 || len(file.Logits) != len(file.Inputs) || len(file.Prompt) > len(file.Inputs) {
			t.Fatalf("accepted an invalid file: %+v", file)
		}
	})
}

// The exported directory reads back through amk's HF import with the same
// weights, and amk's decode of the import equals its decode of the preset.
func TestExportHFReadsBackAsTheSameModel(t *testing.T) {
	m, err := LoadModel("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ExportHF(dir, m.Config, m.Weights); err != nil {
		t.Fatal(err)
	}
	back, err := LoadModel(filepath.Join(dir, ConfigFile), filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	f, err := FromEager(m.Config, m.Weights, []int32{4, 2}, 5, "toy-2L")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(f, back.Config, back.Weights)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pass || rep.ArgmaxAgree != len(f.Inputs) {
		t.Fatalf("%+v", rep)
	}
	for _, s := range rep.Steps {
		if s.MaxAbsErr != 0 {
			t.Fatalf("the import differs at pos %d: %g", s.Pos, s.MaxAbsErr)
		}
	}
}
