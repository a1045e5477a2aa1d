package campaign

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// KnobImportance is how much one searched knob mattered in a campaign: the
// share of the spread of its trials' log latencies that the knob's value
// explains on its own (a main-effect variance decomposition, the idea
// behind optuna's importance view without its random forest), and what
// each of its values gave.
type KnobImportance struct {
	Knob string `json:"knob"`
	// Importance is the knob's share of the summed explained variance of
	// every knob (the shares add up to 1); VarianceExplained is its own
	// share of the total variance (between-value sum of squares over the
	// total, in [0, 1]).
	Importance        float64     `json:"importance"`
	VarianceExplained float64     `json:"variance_explained"`
	Values            []KnobValue `json:"values"`
}

// KnobValue is what one value of a knob gave: how many correct trials had
// it, their geometric mean latency and the fastest.
type KnobValue struct {
	Value  string  `json:"value"`
	Trials int     `json:"trials"`
	MeanUS float64 `json:"mean_us"`
	BestUS float64 `json:"best_us"`
}

// KnobSlice is the slice plot of one knob: every correct trial's latency
// against that knob's value (an index into Values).
type KnobSlice struct {
	Knob   string       `json:"knob"`
	Values []string     `json:"values"`
	Points []SlicePoint `json:"points"`
}

// SlicePoint is one trial in a KnobSlice.
type SlicePoint struct {
	Value     int     `json:"value"`
	LatencyUS float64 `json:"latency_us"`
}

// MinImportanceTrials is the fewest correct trials of a campaign's own
// (prior rows do not count) from which KnobImportances says anything.
const MinImportanceTrials = 6

// KnobImportances ranks the searched knobs by importance, most important
// first, with the slice plot of the first knob. It reads the correct
// trials the model proposer observed (a campaign on the reference proposer
// observes none) and says nothing (nil) from fewer than
// MinImportanceTrials of them, or when they all took the same latency.
func (c *Campaign) KnobImportances() ([]KnobImportance, *KnobSlice) {
	knobs := c.searchKnobs()
	type row struct {
		levels []int
		us     float64
	}
	var rows []row
	mean := 0.0
	for _, o := range c.st.Observations {
		if o.Prior || o.Score == nil || *o.Score <= 0 || len(o.Levels) != len(knobs) {
			continue
		}
		rows = append(rows, row{o.Levels, *o.Score})
		mean += math.Log(*o.Score)
	}
	if len(rows) < MinImportanceTrials {
		return nil, nil
	}
	mean /= float64(len(rows))
	total := 0.0
	for _, r := range rows {
		d := math.Log(r.us) - mean
		total += d * d
	}
	if total <= 0 {
		return nil, nil
	}
	out := make([]KnobImportance, 0, len(knobs))
	explained := make([]float64, 0, len(knobs))
	sum := 0.0
	for i, k := range knobs {
		n := make([]int, len(k.Choices))
		logSum := make([]float64, len(k.Choices))
		best := make([]float64, len(k.Choices))
		for _, r := range rows {
			if l := r.levels[i]; l >= 0 && l < len(n) {
				if n[l] == 0 || r.us < best[l] {
					best[l] = r.us
				}
				n[l]++
				logSum[l] += math.Log(r.us)
			}
		}
		ki := KnobImportance{Knob: k.Path}
		between := 0.0
		for l, cnt := range n {
			if cnt == 0 {
				continue
			}
			m := logSum[l] / float64(cnt)
			between += float64(cnt) * (m - mean) * (m - mean)
			ki.Values = append(ki.Values, KnobValue{Value: pyjson.Compact(k.Choices[l], true), Trials: cnt,
				MeanUS: round4(math.Exp(m)), BestUS: best[l]})
		}
		ki.VarianceExplained = round4(min(1, between/total))
		sum += between
		out = append(out, ki)
		explained = append(explained, between)
	}
	for i := range out {
		if sum > 0 {
			out[i].Importance = round4(explained[i] / sum)
		}
	}
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return out[order[a]].Importance > out[order[b]].Importance })
	ranked := make([]KnobImportance, len(out))
	for i, j := range order {
		ranked[i] = out[j]
	}
	if len(ranked) == 0 {
		return nil, nil
	}
	top := order[0]
	slice := &KnobSlice{Knob: knobs[top].Path}
	for _, ch := range knobs[top].Choices {
		slice.Values = append(slice.Values, pyjson.Compact(ch, true))
	}
	for _, r := range rows {
		if l := r.levels[top]; l >= 0 {
			slice.Points = append(slice.Points, SlicePoint{Value: l, LatencyUS: r.us})
		}
	}
	return ranked, slice
}

func round4(x float64) float64 { return ir.RoundTo(x, 4) }

// importanceBar draws an importance in [0, 1] as a bar of up to 20 blocks.
func importanceBar(x float64) string {
	return strings.Repeat("█", int(math.Round(min(max(x, 0), 1)*20)))
}

// bestValue is the value with the lowest geometric mean latency.
func (k KnobImportance) bestValue() string {
	best := -1
	for i, v := range k.Values {
		if best < 0 || v.MeanUS < k.Values[best].MeanUS {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return k.Values[best].Value
}

// trialsPerValue lists "value: trials" for each value tried.
func (k KnobImportance) trialsPerValue() string {
	parts := make([]string, len(k.Values))
	for i, v := range k.Values {
		parts[i] = fmt.Sprintf("%s: %d", v.Value, v.Trials)
	}
	return strings.Join(parts, ", ")
}
