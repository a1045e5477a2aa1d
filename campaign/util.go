package campaign

import (
	"fmt"
	"math"
	"strconv"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/trial"
)

func pyjsonCompact(v pyjson.Value) string { return pyjson.Compact(v, false) }

func positive(f *float64) bool { return f != nil && ir.Finite(*f) && *f > 0 }

// round3 is Python's round(x, 3).
func round3(x float64) float64 {
	f, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 3, 64), 64)
	if err != nil {
		return x
	}
	return f
}

// num formats a threshold as Python's str() of an int or a float would: an
// integral value without a fraction (the reference's ints), else its repr.
func num(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return strconv.FormatInt(int64(x), 10)
	}
	return pyjson.FormatFloat(x)
}

// kindOrNone renders a latency kind as the reference's f-string does.
func kindOrNone(k trial.LatencyKind) string {
	if k == "" {
		return "None"
	}
	return string(k)
}

func us(f float64) string { return fmt.Sprintf("%.3fus", f) }
