// Package didyoumean suggests the names a user probably meant when a name
// they typed (a model preset, a GPU target, a config key, a knob) is not
// one amk knows: the known names within a small edit distance, compared
// without regard to case.
package didyoumean
