package baseline

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/amk-dev/amk/atomicfile"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/trial"
)

// Files a HuggingFace model directory holds after ExportHF.
const (
	ConfigFile  = "config.json"
	WeightsFile = "model.safetensors"
)

// LoadModel returns a model and the weights every amk evaluator uses for it:
// the safetensors file, else the model's own checkpoint, else the seeded
// init of trial (trial.WeightSeed); trial.ModelCache decides. A
// model too big to hold whole on this host is an error (a baseline needs all
// of it).
func LoadModel(name, weightsPath string) (*trial.LoadedModel, error) {
	m, err := trial.NewModelCache(0).Get(name, weightsPath)
	if err != nil {
		return nil, err
	}
	if m.Truncated() {
		return nil, fmt.Errorf("model %s is too big to hold whole on this host (%d of %d layers fit the check budget)", m.Config.Name, m.Check.NLayers, m.Config.NLayers)
	}
	return m, nil
}

// ExportHF writes cfg and w as a HuggingFace Llama model directory:
// config.json (model.HFConfigJSON) and model.safetensors (HF key names, the
// model dtype). LlamaForCausalLM.from_pretrained(dir) loads it, and so does
// amk (`--weights dir/model.safetensors` with `dir/config.json` as MODEL).
func ExportHF(dir string, cfg model.Config, w model.Weights) error {
	conf, err := model.HFConfigJSON(cfg)
	if err != nil {
		return err
	}
	hf, err := model.ToHFKeys(cfg, w)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, WeightsFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := model.WriteSafetensors(tmp, hf); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, WeightsFile)); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ConfigFile), conf)
}
