package trial

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// An outcome is bound to the spec it answers: whoever evaluates a spec
// stamps the outcome with the spec's Digest (Outcome.SpecDigest), and the
// campaign that issued the trial (and a fleet's dispatcher, which knows
// what it submitted) accepts the outcome only for exactly that spec
// (CheckBound). A spec names its campaign's incarnation (Spec.Incarnation,
// fixed when the campaign is created), so an outcome of a campaign that
// was deleted and created again under the same id, its trial ids starting
// over, answers another spec: it is refused.

// ErrNotIssued is wrapped by CheckBound's refusals: the outcome answers
// another spec than the one issued for its trial.
var ErrNotIssued = errors.New("outcome does not answer the trial issued")

// Digest is the hex SHA-256 of the spec's JSON encoding (encoding/json's,
// which a decode and encode reproduce byte for byte: struct fields in
// order, the point compacted).
func (s Spec) Digest() string {
	b, err := json.Marshal(s)
	if err != nil {
		// A spec that does not encode never reached an evaluator.
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CheckBound refuses an outcome that does not answer spec: another
// campaign or trial, another spec digest, or a verdict about another
// model, decode position, batch or schedule point than the spec's. An
// outcome without a digest is accepted only for a spec without an
// incarnation (a campaign created before outcomes were bound); its verdict
// is still checked. Errors wrap ErrNotIssued.
func CheckBound(spec Spec, o Outcome) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: trial %s/%d: %s", ErrNotIssued, spec.CampaignID, spec.TrialID, fmt.Sprintf(format, args...))
	}
	switch {
	case o.CampaignID != spec.CampaignID || o.TrialID != spec.TrialID:
		return refuse("the outcome is for trial %s/%d", o.CampaignID, o.TrialID)
	case o.SpecDigest == "" && spec.Incarnation != "":
		return refuse("the outcome names no spec digest (an evaluator that does not bind its outcomes?)")
	case o.SpecDigest != "" && o.SpecDigest != spec.Digest():
		return refuse("the outcome answers spec %s, not the one issued (%s): the spec was replaced, or the outcome is of an earlier campaign with this id",
			short(o.SpecDigest), short(spec.Digest()))
	}
	v := o.Verdict
	if v == nil {
		return nil
	}
	batch := max(1, spec.Batch)
	if spec.Workload != nil {
		batch = spec.Workload.B() // a workload's verdict is for its batch
	}
	switch {
	case v.ModelSpec != "" && v.ModelSpec != spec.Model:
		return refuse("the verdict is about model %q, the trial's is %q", v.ModelSpec, spec.Model)
	case v.Pos != nil && *v.Pos != spec.Pos:
		return refuse("the verdict is at decode position %d, the trial's is %d", *v.Pos, spec.Pos)
	case max(1, v.Batch) != batch:
		return refuse("the verdict is for batch %d, the trial's is %d", max(1, v.Batch), batch)
	}
	if v.ScheduleID != "" {
		if p, _, err := parseSpecPoint(spec.Point); err == nil && p.ID() != v.ScheduleID {
			return refuse("the verdict is about schedule %s, the trial's is %s", v.ScheduleID, p.ID())
		}
	}
	return nil
}

// short is a digest's first twelve digits, for messages.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
