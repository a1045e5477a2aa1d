package ir

// DecodeTreeForBench is the tree decoder, for the before/after benchmarks.
func DecodeTreeForBench(data []byte) (*Program, error) {
	return decodeTree(data, Limits{}.withDefaults())
}
