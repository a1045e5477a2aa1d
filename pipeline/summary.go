package pipeline

import "github.com/amk-dev/amk/ir"

// TuneOp is the Loop-1 op name of the FP8 GEMM micro-kernel whose knob is
// its pipeline schedule (amkctl tune-instruction gemm_pipeline).
const TuneOp = "gemm_pipeline"

// ReportedBest is how many of the best safe variants a tuning summary lists.
const ReportedBest = 10

// RankedVariant is one safe variant of a tuning run.
type RankedVariant struct {
	Rank               int     `json:"rank"`
	Variant            string  `json:"variant"`
	MMAUtilisation     float64 `json:"mma_utilisation"`
	CyclesPerIteration float64 `json:"cycles_per_iteration"`
}

// TuneSummary is the JSON verdict of a Loop-1 pipeline tuning run.
type TuneSummary struct {
	Op          string            `json:"op"`
	Target      string            `json:"target"`
	LatencyKind string            `json:"latency_kind"` // always "predicted"
	Variants    int               `json:"variants"`     // proved (and, when safe, simulated): the budget
	Space       int               `json:"space"`        // variants in the whole space
	Safe        int               `json:"safe"`
	Rejected    int               `json:"rejected"`
	RejectedBy  map[string]int    `json:"rejected_by_first_hazard"`
	Best        []RankedVariant   `json:"best"`
	Seed4Wave   *RankedVariant    `json:"seed_4wave"` // the seed's variant, nil if the checker rejected it
	Latencies   ir.PipelineTiming `json:"latencies"`
	Note        string            `json:"note"`
}

// Summarise condenses Tune's ranking for a target: counts, the first
// hazard's rule of every rejected variant, the top safe variants and where
// the seed's 4-wave variant ranks.
func Summarise(cs []Candidate, t *ir.GpuTarget, top int) TuneSummary {
	s := TuneSummary{Op: TuneOp, Target: t.Name, LatencyKind: "predicted", Variants: len(cs), Space: len(Variants()),
		RejectedBy: map[string]int{}, Best: []RankedVariant{},
		Note: "every variant is proved by the hazard checker before it is simulated; utilisations are " +
			"predictions from the target's pipeline timing (estimates), no AMD device was used"}
	if t.Pipeline != nil {
		s.Latencies = *t.Pipeline
	}
	rank := 0
	for _, c := range cs {
		if c.Timing == nil {
			s.Rejected++
			if len(c.Hazards) > 0 {
				s.RejectedBy[c.Hazards[0].Rule]++
			}
			continue
		}
		s.Safe++
		rank++
		rv := RankedVariant{Rank: rank, Variant: c.Variant.Name(), MMAUtilisation: c.Timing.MMAUtilisation,
			CyclesPerIteration: c.Timing.CyclesPerIteration}
		if len(s.Best) < top {
			s.Best = append(s.Best, rv)
		}
		if c.Variant == Seed4Wave {
			s.Seed4Wave = &rv
		}
	}
	return s
}
