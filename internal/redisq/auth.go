package redisq

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/amk-dev/amk/trial"
)

// Outcome authentication.
//
// With a fleet secret (WorkerOptions.Secret, DispatcherOptions.Secret) every
// outcome a worker (or the dispatcher itself, for a lost or poison trial)
// puts in Redis carries "mac": the hex HMAC-SHA256, keyed by the secret, of
// macDomain followed by the outcome's canonical encoding — encoding/json's
// encoding of the trial.Outcome (struct fields in declaration order, map
// keys sorted, floats in their shortest form), which a decode/encode round
// trip reproduces byte for byte. A dispatcher with a secret refuses every
// outcome whose MAC is missing or wrong, wherever it comes from (results
// queue, doorbell, stored task result), and counts it (OnReject); a trial
// whose only outcome was refused is evaluated again by the sweep.
//
// Without a secret outcomes travel unauthenticated and are accepted as they
// are: the daemons say so at startup. This keeps a single-host setup and
// existing fleets working; a fleet whose Redis others can write to must set
// one (see deploy/README.md).

// macDomain separates outcome MACs from any other use of the secret.
const macDomain = "amk outcome v1\n"

// Reasons an outcome is refused, as passed to OnReject.
const (
	RejectMissingMAC = "missing_mac"
	RejectBadMAC     = "bad_mac"
	RejectMalformed  = "malformed"
)

// errRejected is wrapped by openOutcome's refusals.
var errRejected = errors.New("outcome refused")

// signedOutcome is the wire form: the outcome's fields and its MAC.
type signedOutcome struct {
	trial.Outcome
	MAC string `json:"mac,omitempty"`
}

// macOf is the hex MAC of an outcome's canonical encoding.
func macOf(secret, canonical []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(macDomain))
	m.Write(canonical)
	return hex.EncodeToString(m.Sum(nil))
}

// sealOutcome encodes out for Redis, with its MAC when secret is set.
func sealOutcome(secret []byte, out trial.Outcome) ([]byte, error) {
	canonical, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	if len(secret) == 0 {
		return canonical, nil
	}
	if !bytes.HasSuffix(canonical, []byte("}")) {
		return nil, errors.New("outcome does not encode as a JSON object")
	}
	var b bytes.Buffer
	b.Write(canonical[:len(canonical)-1])
	if len(canonical) > 2 {
		b.WriteByte(',')
	}
	fmt.Fprintf(&b, `"mac":%q}`, macOf(secret, canonical))
	return b.Bytes(), nil
}

// openOutcome decodes an outcome from Redis and, when secret is set,
// checks its MAC. reason is one of the Reject* constants when it fails.
func openOutcome(secret, payload []byte) (out trial.Outcome, reason string, err error) {
	var s signedOutcome
	if err := json.Unmarshal(payload, &s); err != nil {
		return out, RejectMalformed, fmt.Errorf("%w: malformed: %v", errRejected, err)
	}
	if len(secret) == 0 {
		return s.Outcome, "", nil
	}
	if s.MAC == "" {
		return out, RejectMissingMAC, fmt.Errorf("%w: no MAC (is the worker configured with the fleet secret?)", errRejected)
	}
	canonical, err := json.Marshal(s.Outcome)
	if err != nil {
		return out, RejectMalformed, fmt.Errorf("%w: %v", errRejected, err)
	}
	if !hmac.Equal([]byte(s.MAC), []byte(macOf(secret, canonical))) {
		return out, RejectBadMAC, fmt.Errorf("%w: wrong MAC (forged, altered, or signed with another fleet secret)", errRejected)
	}
	return s.Outcome, "", nil
}
