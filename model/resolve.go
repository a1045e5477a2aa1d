package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrModelNotAllowed is wrapped by ResolveUnder's refusals.
var ErrModelNotAllowed = errors.New("model not allowed")

// ResolveUnder resolves a model named by a remote caller (the API): a preset
// name is returned as it is; anything else must be a relative path to a
// file or directory inside dir, and is returned as the absolute path of
// that file after following symbolic links. Absolute paths, paths with a
// ".." element, and links that lead outside dir are refused without looking
// at the file system, so the answer never reveals whether a path outside
// dir exists. An empty dir allows presets only. The same rule serves a
// weights file (what is "weights" names the field in errors).
func ResolveUnder(what, name, dir string, allowPreset bool) (string, error) {
	if allowPreset { // a model may name a quantization scheme after its preset or path
		base, q, err := SplitModelSpec(name)
		if err != nil {
			return "", fmt.Errorf("%w: %s %q: %v", ErrModelNotAllowed, what, name, err)
		}
		if q.On() {
			r, err := resolveUnder(what, base, dir, allowPreset)
			if err != nil {
				return "", err
			}
			return ModelSpec(r, q), nil
		}
	}
	return resolveUnder(what, name, dir, allowPreset)
}

func resolveUnder(what, name, dir string, allowPreset bool) (string, error) {
	if allowPreset {
		if _, err := Preset(name); err == nil {
			return name, nil
		}
	}
	refuse := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %s %q: %s", ErrModelNotAllowed, what, name, fmt.Sprintf(format, args...))
	}
	presets := ""
	if allowPreset {
		presets = " (presets: " + strings.Join(PresetNames(), ", ") + ")"
	}
	if dir == "" {
		return refuse("not a preset%s, and this server has no models directory (models_dir) for files", presets)
	}
	if name == "" || filepath.IsAbs(name) || strings.HasPrefix(name, "~") || filepath.VolumeName(name) != "" {
		return refuse("a file must be named by a path relative to the models directory%s", presets)
	}
	if slices.Contains(strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }), "..") {
		return refuse("a path may not leave the models directory")
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("models directory: %w", err)
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("models directory: %w", err)
	}
	full, err := filepath.EvalSymlinks(filepath.Join(root, name))
	if err != nil {
		return refuse("not found in the models directory%s", presets)
	}
	if rel, err := filepath.Rel(root, full); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return refuse("a path may not leave the models directory")
	}
	if _, err := os.Stat(full); err != nil {
		return refuse("not found in the models directory%s", presets)
	}
	return full, nil
}
