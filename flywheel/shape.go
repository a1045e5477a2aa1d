package flywheel

import (
	"math"
	"regexp"
	"strconv"
)

// Shape is the model shape the prior keys schedules on (not the model's
// name): two models of the same shape family optimise alike.
type Shape struct {
	Hidden       int `json:"hidden"`
	NLayers      int `json:"n_layers"`
	NHeads       int `json:"n_heads"`
	NKVHeads     int `json:"n_kv_heads"`
	HeadDim      int `json:"head_dim"`
	Intermediate int `json:"intermediate"`
	Vocab        int `json:"vocab"`
}

// Where a record's shape came from.
const (
	ShapeFromConfig    = "config"      // written by amk from the model config
	ShapeFromSchedule  = "schedule"    // shape keys inside the reference record's schedule
	ShapeFromRecord    = "model_shape" // the reference record's model_shape object
	ShapeFromNameRegex = "name-regex"  // guessed from the model name, e.g. "small(4L/2048h)"
)

// Features is the shape's feature vector: log-scaled sizes, the GQA group
// ratio and the FFN ratio (the reference's feature_vec).
func (s Shape) Features() []float64 {
	lg := func(x int) float64 { return math.Log1p(float64(max(0, x))) }
	gqa := 1.0
	if s.NKVHeads != 0 {
		gqa = float64(s.NHeads) / float64(s.NKVHeads)
	}
	ffn := 0.0
	if s.Hidden != 0 {
		ffn = float64(s.Intermediate) / float64(s.Hidden)
	}
	return []float64{lg(s.Hidden), lg(s.NLayers), lg(s.NHeads), gqa, lg(s.HeadDim), ffn, lg(s.Vocab)}
}

// Distance is the Euclidean distance between two shapes' features; 0 means
// the same shape family.
func (s Shape) Distance(o Shape) float64 {
	a, b := s.Features(), o.Features()
	sum := 0.0
	for i := range a {
		d := a[i] - b[i]
		sum += d * d
	}
	return math.Sqrt(sum)
}

// The reference's name hints: "(2048h/4L/...)".
var (
	hiddenHint = regexp.MustCompile(`(\d+)\s*h`)
	layersHint = regexp.MustCompile(`(\d+)\s*L`)
)

// ShapeFromName guesses a shape from a model name the way the reference
// prior does (hidden from `(\d+)\s*h`, layers from `(\d+)\s*L`, the rest 0).
func ShapeFromName(name string) Shape {
	var s Shape
	if m := hiddenHint.FindStringSubmatch(name); m != nil {
		s.Hidden = atoiClamped(m[1])
	}
	if m := layersHint.FindStringSubmatch(name); m != nil {
		s.NLayers = atoiClamped(m[1])
	}
	return s
}

func atoiClamped(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return math.MaxInt32
	}
	return n
}
