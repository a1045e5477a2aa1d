package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/amk-dev/amk/didyoumean"
	"github.com/amk-dev/amk/inputfile"
)

// maxConfigBytes bounds a config.json read by Load.
const maxConfigBytes = 16 << 20

// ImportMaxSeq caps the decode window of an imported config: HF configs
// advertise their whole context (131072 for Llama 3), and the lowering sizes
// every KV cache by max_seq, so an uncapped import would allocate gigabytes
// of cache to check one decode step. Decode positions beyond the cap are
// refused with a clear error by the lowering.
const ImportMaxSeq = 4096

// Load resolves a model argument: a preset name, a path to a HuggingFace
// config.json, a directory holding one, or a HuggingFace id ("ORG/NAME",
// "ORG/NAME@REVISION") found in the local hub cache (hfcache.go; a path
// that exists wins over an id), optionally followed by
// ModelSpecSep and a quantization scheme ("small:w4a16-g64",
// SplitModelSpec): the model with its projections quantised.
func Load(spec string) (Config, error) {
	nameOrPath, q, err := SplitModelSpec(spec)
	if err != nil {
		return Config{}, err
	}
	cfg, err := loadFloat(nameOrPath)
	if err != nil || !q.On() {
		return cfg, err
	}
	cfg = cfg.Quantized(q)
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func loadFloat(nameOrPath string) (Config, error) {
	if cfg, err := Preset(nameOrPath); err == nil {
		return cfg, nil
	}
	path := nameOrPath
	info, err := os.Stat(path)
	if err != nil {
		id, isID := ParseHFModelID(nameOrPath)
		if !isID {
			return Config{}, fmt.Errorf("%w %q%s: not a preset (%s) and not a readable config.json: %v",
				ErrUnknownModel, nameOrPath, hint(nameOrPath), strings.Join(PresetNames(), ", "), err)
		}
		snap, herr := ResolveHFModel(id, os.Getenv)
		if herr != nil {
			return Config{}, fmt.Errorf("%w %q: not a preset (%s) nor a path, and %w", ErrUnknownModel, nameOrPath,
				strings.Join(PresetNames(), ", "), herr)
		}
		path = snap
		if info, err = os.Stat(path); err != nil {
			return Config{}, err
		}
	}
	if info.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	data, err := inputfile.ReadFile(path, maxConfigBytes) // regular files only, bounded
	if err != nil {
		return Config{}, err
	}
	cfg, err := FromHFConfig(data, 0)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	cfg.MaxSeq = min(cfg.MaxSeq, ImportMaxSeq)
	return cfg, nil
}

// ErrUnknownModel is the error of a model name that is neither a preset nor
// a readable config.json; fronts treat it as bad input.
var ErrUnknownModel = errors.New("unknown model")

// hint is didyoumean's hint for a mistyped preset name in parentheses after
// a space, or "" when no preset is close.
func hint(name string) string {
	if h := didyoumean.Hint(name, PresetNames()); h != "" {
		return " (" + h + ")"
	}
	return ""
}
