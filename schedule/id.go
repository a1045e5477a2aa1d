package schedule

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// hashID is "sch_" + the first 10 hex digits of the SHA-1 of the value as
// Python's json.dumps(v, sort_keys=True) writes it (package pyjson).
func hashID(v pyjson.Value) string {
	sum := sha1.Sum([]byte(pyjson.Compact(v, true)))
	return "sch_" + hex.EncodeToString(sum[:])[:10]
}

// ID is the schedule id of a point, computed exactly as the reference's
// harness does (harness._sid_with_knobs), so that ids join across amk and
// AMK results and corpora: the config written as ScheduleConfig.to_dict()
// writes it (all seven fields, values as the point holds them, not
// normalised), with "kernel_knobs" embedded only when some knob differs from
// its default. amk's own points are normalised before they are hashed (the
// campaign projects every point), so one campaign point has one id.
func (p Point) ID() string {
	v := ir.ConfigValue(&p.Config)
	if knobs := p.Normalize().Knobs; !defaultKnobs(knobs) {
		v.Obj = append(v.Obj, pyjson.M("kernel_knobs", knobsValue(knobs)))
	}
	return hashID(v)
}

// defaultKnobs reports whether normalised knobs (the searched four always
// present, others only when they differ from their defaults) are all at
// their defaults.
func defaultKnobs(knobs map[string]int) bool {
	for _, k := range kernelKnobs {
		v, ok := knobs[k.name]
		if ok && v != k.def {
			return false
		}
	}
	return true
}

// ConfigID hashes a config dict alone, exactly as given (no normalisation,
// no knobs). It reproduces the reference's historical ids: default_config()
// is sch_c3af28020e and ScheduleConfig() is sch_d74fe3be8d.
func ConfigID(c ir.ScheduleConfig) string { return hashID(ir.ConfigValue(&c)) }
