package redisq

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/trial"
)

// Task types on the queues.
const (
	// TypeTrial is a trial to evaluate; its payload is a JSON trial.Spec.
	TypeTrial = "amk:trial"
	// TypeOutcome is an evaluated trial; its payload is a JSON trial.Outcome.
	TypeOutcome = "amk:outcome"
)

// Task headers that carry the retry budgets from the dispatcher to the
// workers, so both sides agree without shared configuration.
const (
	headerInfraRetries = "amk-infra-retries"
	headerWorkerLosses = "amk-worker-losses"
)

// TrialQueue is the queue of trials for a GPU target, e.g. "trials:h100";
// with a namespace, "ns:trials:h100".
func TrialQueue(namespace, target string) string {
	return prefix(namespace) + "trials:" + target
}

// ResultQueue is the queue outcomes come back on.
func ResultQueue(namespace string) string { return prefix(namespace) + "results" }

// receivedKey counts the outcomes dispatchers of a namespace handed to
// their scheduler, whichever way each came (the doorbell, the results
// queue, a stored result found on resubmission).
func receivedKey(namespace string) string { return prefix(namespace) + "amk:outcomes_received" }

func prefix(namespace string) string {
	if namespace == "" {
		return ""
	}
	return namespace + ":"
}

// infraKey counts a trial's infrastructure failures (asynq's retry counter
// also counts lost workers; the difference tells them apart).
func infraKey(queue, taskID string) string { return "amk:infra:{" + queue + "}:" + taskID }

// TaskID is the deterministic asynq task id of a trial: campaign + "/" +
// trial id (dispatch.Key), so enqueueing it twice collapses into one task.
func TaskID(spec trial.Spec) string { return dispatch.Key(spec) }

// errBadKey is wrapped by ParseTaskID.
var errBadKey = errors.New("not a campaign/trial task id")

// ParseTaskID splits a task id made by TaskID back into campaign and trial.
// A re-offer's suffix ("#r1") is dropped: it names the same trial.
func ParseTaskID(id string) (campaign string, trialID int, err error) {
	id = trialKeyOf(id)
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", 0, fmt.Errorf("%q: %w", id, errBadKey)
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", id, errBadKey)
	}
	return id[:i], n, nil
}

// validTarget reports whether target can name a queue.
func validTarget(target string) error {
	if target == "" {
		return errors.New("empty GPU target")
	}
	for _, r := range target {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("GPU target %q: only letters, digits, '-', '_' and '.' may name a queue", target)
		}
	}
	return nil
}
