package model

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveUnderConfinesFilesToTheModelsDirectory(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	if err := os.MkdirAll(filepath.Join(models, "llama"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(models, "llama", "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(models, "escape.json")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir, want string }{
		{"toy", "", "toy"},
		{"toy-2L", models, "toy-2L"},
		{"llama/config.json", models, filepath.Join(models, "llama", "config.json")},
		{"llama", models, filepath.Join(models, "llama")},
	} {
		got, err := ResolveUnder("model", tc.name, tc.dir, true)
		if want, _ := filepath.EvalSymlinks(tc.want); err != nil || (got != tc.want && got != want) {
			t.Errorf("ResolveUnder(%q, %q) = %q, %v; want %q", tc.name, tc.dir, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ name, dir, msg string }{
		{"/etc/shadow", models, "relative to the models directory"},
		{"/etc/passwd", models, "relative to the models directory"},
		{secret, models, "relative to the models directory"},
		{"../secret.json", models, "may not leave"},
		{"llama/../../secret.json", models, "may not leave"},
		{"escape.json", models, "may not leave"},
		{"absent.json", models, "not found"},
		{"llama/config.json", "", "no models directory"},
		{"/etc/shadow", "", "no models directory"},
	} {
		_, err := ResolveUnder("model", tc.name, tc.dir, true)
		if !errors.Is(err, ErrModelNotAllowed) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ResolveUnder(%q, %q): %v, want a refusal with %q", tc.name, tc.dir, err, tc.msg)
		}
	}
	// The refusal of an outside path is the same whether the file exists.
	_, errExists := ResolveUnder("model", "/etc/passwd", models, true)
	_, errAbsent := ResolveUnder("model", "/etc/no-such-file", models, true)
	if strings.Replace(errExists.Error(), "/etc/passwd", "X", 1) != strings.Replace(errAbsent.Error(), "/etc/no-such-file", "X", 1) {
		t.Errorf("refusals differ by existence: %v / %v", errExists, errAbsent)
	}
	if _, err := ResolveUnder("weights", "toy", models, false); err == nil {
		t.Error("a preset name was accepted for a weights file")
	}
}

// FuzzResolveUnder: whatever name a request sends, the answer is a preset,
// a path inside the models directory, or a refusal.
func FuzzResolveUnder(f *testing.F) {
	for _, s := range []string{"toy", "llama/config.json", "../x", "/etc/passwd", "a/../../b", "~root", "", ".", "llama/..", "escape.json"} {
		f.Add(s)
	}
	dir := f.TempDir()
	models := filepath.Join(dir, "models")
	if err := os.MkdirAll(filepath.Join(models, "llama"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(models, "escape.json")); err != nil {
		f.Fatal(err)
	}
	root, _ := filepath.EvalSymlinks(models)
	f.Fuzz(func(t *testing.T, name string) {
		got, err := ResolveUnder("model", name, models, true)
		if err != nil {
			return
		}
		if _, perr := Preset(got); perr == nil && got == name {
			return
		}
		if rel, rerr := filepath.Rel(root, got); rerr != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("%q resolved outside the models directory: %s", name, got)
		}
	})
}
