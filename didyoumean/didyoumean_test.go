package didyoumean

import (
	"slices"
	"testing"
)

var presets = []string{"toy", "toy-1L", "toy-2L", "small", "small-bf16", "llama-1b", "tinyllama", "llama-8b"}
var gpus = []string{"a100", "a10g", "b200", "gb200", "h100", "h200", "l4", "l40s", "mi300x", "t4"}

func TestSuggest(t *testing.T) {
	cases := []struct {
		word  string
		known []string
		want  []string
	}{
		{"smal", presets, []string{"small", "small-bf16"}},
		{"SMALL", presets, []string{"small", "small-bf16"}}, // case is ignored
		{"h2000", gpus, []string{"h200"}},
		{"hh100", gpus, []string{"h100"}},
		{"tilling", []string{"tiling", "fusion_grouping", "pipelining_depth"}, []string{"tiling"}},
		{"N_tlie", []string{"N_tile", "base_width", "tiles_per_sm"}, []string{"N_tile"}}, // a swap is one edit
		{"zzzzzz", presets, nil},
		{"", presets, nil},
	}
	for _, c := range cases {
		if got := Suggest(c.word, c.known); !slices.Equal(got, c.want) {
			t.Errorf("Suggest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

func TestHint(t *testing.T) {
	if got, want := Hint("h2000", gpus), `did you mean "h200"?`; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	if got, want := Hint("smal", presets), `did you mean "small" or "small-bf16"?`; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	if got := Hint("qqqq", gpus); got != "" {
		t.Errorf("Hint of a far word = %q, want empty", got)
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"h2000", "h200", 1}} {
		if got := distance(c.a, c.b); got != c.d {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
