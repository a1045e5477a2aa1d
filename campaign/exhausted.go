package campaign

import (
	"fmt"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
)

// SpacePoints is the number of distinct points of the campaign's search
// space (its device's effective knobs on its target, schedule.SpaceSize):
// 560 for a CPU campaign on any preset.
func (c *Campaign) SpacePoints() int {
	return schedule.SpaceSize(c.searchSpace())
}

// exhaustedMessage is the plain statement of an exhausted search space.
func (c *Campaign) exhaustedMessage() string {
	return fmt.Sprintf("search space exhausted: %d of the %d points of the %s search space on %s tried, "+
		"and %d random draws found no other", len(c.st.Tried), c.SpacePoints(), c.st.Device, c.st.GPU, c.st.Settings.MaxDraws)
}

// Widen says what would give an exhausted campaign new points to try (nil
// while the space is not exhausted). What it names comes from
// schedule.Space: the knobs a GPU evaluation adds, and the reserved ones.
func (c *Campaign) Widen() []string {
	if !c.st.Exhausted {
		return nil
	}
	var out []string
	if c.st.Device == schedule.DeviceCPU {
		if joined := gpuOnlyKnobs(c.target); joined != "" {
			cuda := schedule.SpaceSize(schedule.Space(c.target, schedule.DeviceCUDA))
			out = append(out, fmt.Sprintf("evaluate on a GPU (--device cuda): %s join the space, %d points instead of %d, "+
				"and latencies become measurements", joined, cuda, c.SpacePoints()))
		}
	}
	widen := "widen the space itself by adding choices in schedule.Space (e.g. another tiling.gemv.N_tile width)"
	if reserved := reservedKnobs(); reserved != "" {
		widen += "; " + reserved + " reserved in amk (no effect on the program), so varying them adds no new schedule"
	}
	out = append(out,
		"start a campaign on another GPU target or model (a different --name keeps this one): every target and "+
			"model has its own best schedule",
		widen)
	return out
}

// gpuOnlyKnobs names, grouped by scope, the knobs that are effective in the
// target's cuda search space but not in its cpu one ("" when there are
// none, as on an AMD target, which has no kernel build).
func gpuOnlyKnobs(t *ir.GpuTarget) string {
	onCPU := map[string]bool{}
	for _, k := range schedule.Space(t, schedule.DeviceCPU) {
		onCPU[k.Path] = k.Effective
	}
	byScope := map[string][]string{}
	var scopes []string
	for _, k := range schedule.Space(t, schedule.DeviceCUDA) {
		if !k.Effective || onCPU[k.Path] {
			continue
		}
		if _, seen := byScope[k.Scope]; !seen {
			scopes = append(scopes, k.Scope)
		}
		byScope[k.Scope] = append(byScope[k.Scope], k.Path)
	}
	var groups []string
	for _, s := range scopes {
		groups = append(groups, fmt.Sprintf("%s (%s)", countedKnobs(len(byScope[s]), s), strings.Join(byScope[s], ", ")))
	}
	return strings.Join(groups, " and ")
}

// countedKnobs is "1 lowering knob" or "4 kernel-build knobs".
func countedKnobs(n int, scope string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s knob", scope)
	}
	return fmt.Sprintf("%d %s knobs", n, scope)
}

// reservedKnobs names the knobs no evaluator draws on any target: those
// not effective even in the cuda space of a target with no restrictions
// (schedule.Space with a nil target), as "a, b and c are" or "a is" ("" when
// there are none).
func reservedKnobs() string {
	var paths []string
	for _, k := range schedule.Space(nil, schedule.DeviceCUDA) {
		if !k.Effective {
			paths = append(paths, k.Path)
		}
	}
	switch len(paths) {
	case 0:
		return ""
	case 1:
		return paths[0] + " is"
	}
	return strings.Join(paths[:len(paths)-1], ", ") + " and " + paths[len(paths)-1] + " are"
}
