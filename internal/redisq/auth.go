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
// Specs are signed the same way (specDomain): a dispatcher with a secret
// puts "mac" on every trial payload it enqueues, and a worker with the
// secret evaluates only payloads whose MAC is right: a spec replaced on the
// queue, or a spec of another trial moved under this trial's task id, is
// refused before anything is evaluated, archived, and nothing is
// published for it; the dispatcher's sweep finds the archived task and
// enqueues the spec it issued again. Outcomes also name the digest of the
// spec they answer (trial.Outcome.SpecDigest, which the MAC covers), and
// the dispatcher delivers an outcome only for the spec it submitted under
// that trial (trial.CheckBound), so an outcome captured from a campaign
// that was deleted and created again with the same id (another
// incarnation, hence other specs) is refused too (RejectNotIssued).
//
// Without a secret outcomes travel unauthenticated and are accepted as they
// are: the daemons say so at startup. This keeps a single-host setup and
// existing fleets working; a fleet whose Redis others can write to must set
// one (see deploy/README.md).

// macDomain and specDomain separate outcome and spec MACs from each other
// and from any other use of the secret.
const (
	macDomain  = "amk outcome v1\n"
	specDomain = "amk spec v1\n"
)

// Reasons an outcome is refused, as passed to OnReject.
const (
	RejectMissingMAC = "missing_mac"
	RejectBadMAC     = "bad_mac"
	RejectMalformed  = "malformed"
	// RejectNotIssued: the outcome answers another spec than the one
	// submitted for its trial (trial.CheckBound).
	RejectNotIssued = "not_issued"
)

// errRejected is wrapped by openOutcome's refusals.
var errRejected = errors.New("outcome refused")

// signedOutcome is the wire form: the outcome's fields and its MAC.
type signedOutcome struct {
	trial.Outcome
	MAC string `json:"mac,omitempty"`
}

// macOf is the hex MAC of an outcome's canonical encoding.
func macOf(secret, canonical []byte) string { return domainMAC(secret, macDomain, canonical) }

// domainMAC is the hex MAC of a canonical encoding in a domain.
func domainMAC(secret []byte, domain string, canonical []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(domain))
	m.Write(canonical)
	return hex.EncodeToString(m.Sum(nil))
}

// sealOutcome encodes out for Redis, with its MAC when secret is set.
func sealOutcome(secret []byte, out trial.Outcome) ([]byte, error) {
	return seal(secret, macDomain, out)
}

// sealSpec encodes a trial payload, with its MAC when secret is set.
func sealSpec(secret []byte, spec trial.Spec) ([]byte, error) {
	return seal(secret, specDomain, spec)
}

// seal is v's JSON object with "mac" added, the MAC of its canonical
// encoding in domain, when secret is set.
func seal(secret []byte, domain string, v any) ([]byte, error) {
	canonical, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(secret) == 0 {
		return canonical, nil
	}
	if !bytes.HasSuffix(canonical, []byte("}")) {
		return nil, errors.New("does not encode as a JSON object")
	}
	var b bytes.Buffer
	b.Write(canonical[:len(canonical)-1])
	if len(canonical) > 2 {
		b.WriteByte(',')
	}
	fmt.Fprintf(&b, `"mac":%q}`, domainMAC(secret, domain, canonical))
	return b.Bytes(), nil
}

// signedSpec is a trial payload: the spec's fields and its MAC.
type signedSpec struct {
	trial.Spec
	MAC string `json:"mac,omitempty"`
}

// checkSpecMAC checks a decoded payload's MAC when secret is set: the spec
// must be exactly one a dispatcher with the secret issued.
func checkSpecMAC(secret []byte, s signedSpec) error {
	if len(secret) == 0 {
		return nil
	}
	if s.MAC == "" {
		return errors.New("the trial payload carries no MAC (is the scheduler configured with the fleet secret?)")
	}
	canonical, err := json.Marshal(s.Spec)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(s.MAC), []byte(domainMAC(secret, specDomain, canonical))) {
		return errors.New("the trial payload's MAC is wrong: it was replaced or altered on the queue, or signed with another fleet secret")
	}
	return nil
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
