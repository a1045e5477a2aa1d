package schedule

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// hashID is "sch_" + the first 10 hex digits of the SHA-1 of the value as
// Python's json.dumps(v, sort_keys=True) writes it (§1.7).
func hashID(v pyjson.Value) string {
	sum := sha1.Sum([]byte(pyjson.Compact(v, true)))
	return "sch_" + hex.EncodeToString(sum[:])[:10]
}

// ID is the one schedule id of a point (docs/spec/rules.md R11): the hash of the normalised
// config dict with the normalised "kernel_knobs" object embedded.
func (p Point) ID() string { return hashID(p.Normalize().Value()) }

// ConfigID hashes a config dict alone, exactly as given (no normalisation,
// no knobs). It reproduces the reference's historical ids: default_config()
// is sch_c3af28020e and ScheduleConfig() is sch_d74fe3be8d.
func ConfigID(c ir.ScheduleConfig) string { return hashID(ir.ConfigValue(&c)) }
