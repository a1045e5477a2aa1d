package campaign

import (
	"fmt"

	"github.com/amk-dev/amk/schedule"
)

// SpacePoints is the number of distinct points of the campaign's search
// space (its device's effective knobs on its target, schedule.SpaceSize):
// 560 for a CPU campaign on any preset.
func (c *Campaign) SpacePoints() int {
	return schedule.SpaceSize(schedule.Space(c.target, c.st.Device))
}

// exhaustedMessage is the plain statement of an exhausted search space.
func (c *Campaign) exhaustedMessage() string {
	return fmt.Sprintf("search space exhausted: %d of the %d points of the %s search space on %s tried, "+
		"and %d random draws found no other", len(c.st.Tried), c.SpacePoints(), c.st.Device, c.st.GPU, c.st.Settings.MaxDraws)
}

// Widen says what would give an exhausted campaign new points to try (nil
// while the space is not exhausted).
func (c *Campaign) Widen() []string {
	if !c.st.Exhausted {
		return nil
	}
	var out []string
	if c.st.Device == schedule.DeviceCPU {
		cuda := schedule.SpaceSize(schedule.Space(c.target, schedule.DeviceCUDA))
		out = append(out, fmt.Sprintf("evaluate on a GPU (--device cuda): the SMEM opt-in and the four kernel build "+
			"knobs join the space, %d points instead of %d, and latencies become measurements", cuda, c.SpacePoints()))
	}
	out = append(out,
		"start a campaign on another GPU target or model (a different --name keeps this one): every target and "+
			"model has its own best schedule",
		"widen the space itself by adding choices in schedule.Space (e.g. another tiling.gemv.N_tile width); "+
			"kv_block, fusion_grouping and page_allocation are reserved in amk (no effect on the program), so "+
			"varying them adds no new schedule")
	return out
}
