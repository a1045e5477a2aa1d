package didyoumean

import (
	"fmt"
	"strings"
)

// Suggest returns the known names closest to word: those at the smallest
// edit distance (insertions, deletions, substitutions and swaps of two
// neighbouring letters, case ignored), provided that distance is at most a
// third of the word's length (at least 1, at most 3), plus any known name
// that starts with word or that word starts with. An empty word, or one
// far from every name, gets none. The order is the order of known.
func Suggest(word string, known []string) []string {
	w := strings.ToLower(strings.TrimSpace(word))
	if w == "" {
		return nil
	}
	limit := min(max(len(w)/3, 1), 3)
	best := limit + 1
	dist := make([]int, len(known))
	for i, k := range known {
		dist[i] = distance(w, strings.ToLower(k))
		best = min(best, dist[i])
	}
	var out []string
	for i, k := range known {
		lk := strings.ToLower(k)
		prefix := len(w) >= 2 && (strings.HasPrefix(lk, w) || strings.HasPrefix(w, lk)) && lk != w
		if dist[i] == best || prefix {
			out = append(out, k)
		}
	}
	return out
}

// Hint is Suggest as a phrase for an error message: `did you mean "small"?`,
// `did you mean "h100" or "h200"?`, or "" when nothing is close.
func Hint(word string, known []string) string {
	s := Suggest(word, known)
	if len(s) == 0 {
		return ""
	}
	q := make([]string, len(s))
	for i, name := range s {
		q[i] = fmt.Sprintf("%q", name)
	}
	if len(q) == 1 {
		return "did you mean " + q[0] + "?"
	}
	return "did you mean " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1] + "?"
}

// distance is the optimal-string-alignment edit distance between a and b,
// counted in bytes (the names amk knows are ASCII).
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
