package calibrate

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	"github.com/amk-dev/amk/schedule"
)

// Record is the fit as a cost record: the identified quantities' fields
// (Overrides) and prov completed with the point count, the errors and which
// parameters were fitted or kept at their defaults.
func (r *Result) Record(prov schedule.CostProvenance) schedule.CostRecord {
	prov.Points = len(r.Measured)
	prov.RMSLogErrorBefore = roundSig(r.RMSBefore, 4)
	prov.RMSLogErrorAfter = roundSig(r.RMSAfter, 4)
	prov.Fitted, prov.KeptDefault = []string{}, []string{}
	for _, p := range r.Params {
		fp, _ := findFitParam(p.Name)
		if p.Identified {
			prov.Fitted = append(prov.Fitted, fp.Fields...)
		} else {
			prov.KeptDefault = append(prov.KeptDefault, fp.Fields...)
		}
	}
	sort.Strings(prov.Fitted)
	sort.Strings(prov.KeptDefault)
	params := make(map[string]float64, len(r.Overrides))
	maps.Copy(params, r.Overrides)
	return schedule.CostRecord{Params: params, Provenance: prov}
}

// Worse reports whether the fit predicts the points worse than the
// defaults did (or an error is not a number).
func (r *Result) Worse() bool { return !(r.RMSAfter <= r.RMSBefore) }

// Markdown is the fit's report: the parameters (default, fitted, whether
// the points identify each) and, for every point, measured and predicted
// latency before and after with their errors.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Calibration of %s on %d measured points (%d predictions of the set).\n\n", r.Target, len(r.Measured), r.Evaluations)
	b.WriteString("| parameter | default | fitted | partial sensitivity | ± (1 s.e. of ln) | status |\n|---|---:|---:|---:|---:|---|\n")
	for _, p := range r.Params {
		status := "fitted"
		switch {
		case !p.Identified:
			status = "not identified by these points: kept at its default"
		case p.AtBound:
			status = "fitted, at a bound of its range"
		}
		se := "–"
		if !math.IsNaN(p.StdErr) && p.Identified {
			se = fmt.Sprintf("%.3f", p.StdErr)
		}
		fmt.Fprintf(&b, "| %s | %.4g | %.4g | %.3g | %s | %s |\n", p.Name, p.Default, p.Fitted, p.Sensitivity, se, status)
	}
	b.WriteString("\n| point | measured µs | predicted before µs | predicted after µs | error before | error after |\n|---|---:|---:|---:|---:|---:|\n")
	for i, l := range r.Labels {
		m := r.Measured[i]
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %+.1f%% | %+.1f%% |\n", l, m, r.PredBefore[i], r.PredAfter[i],
			(r.PredBefore[i]/m-1)*100, (r.PredAfter[i]/m-1)*100)
	}
	fmt.Fprintf(&b, "| RMS of ln(predicted / measured) | | | | %.4f | %.4f |\n", r.RMSBefore, r.RMSAfter)
	return b.String()
}
