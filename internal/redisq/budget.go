package redisq

import (
	"strconv"
	"time"
)

// Default retry budgets.
const (
	// DefaultInfraRetries is how often a trial whose evaluator reported an
	// infrastructure failure (trial.FailInfra) is tried again.
	DefaultInfraRetries = 3
	// DefaultWorkerLosses is how many workers a trial may lose (killed,
	// hung past its lease, shut down hard) before it is reported as a crash.
	DefaultWorkerLosses = 3
)

// budget is a trial's two separate retry budgets.
type budget struct {
	infra  int // re-runs after FailInfra outcomes
	losses int // attempts that ended without the handler returning
}

// resolveBudget applies the option convention: 0 = default, negative = none.
func resolveBudget(infra, losses int) budget {
	return budget{infra: orDefault(infra, DefaultInfraRetries), losses: orDefault(losses, DefaultWorkerLosses)}
}

func orDefault(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

func (b budget) headers() map[string]string {
	return map[string]string{
		headerInfraRetries: strconv.Itoa(b.infra),
		headerWorkerLosses: strconv.Itoa(b.losses),
	}
}

// budgetFrom reads the budgets a dispatcher put on a task; missing or bad
// headers (a task enqueued by hand) get the defaults.
func budgetFrom(h map[string]string) budget {
	read := func(key string, def int) int {
		n, err := strconv.Atoi(h[key])
		if err != nil || n < 0 {
			return def
		}
		return n
	}
	return budget{infra: read(headerInfraRetries, DefaultInfraRetries), losses: read(headerWorkerLosses, DefaultWorkerLosses)}
}

// maxRetry is asynq's retry limit for a trial task. It sits above both
// budgets together, so asynq never archives a trial on its own: the worker
// decides, and reports a crash once the loss budget is spent.
func (b budget) maxRetry() int { return b.infra + b.losses + 2 }

// retryDelay is the asynq RetryDelayFunc of trial workers: exponential from
// base, capped at a minute.
func retryDelay(base time.Duration) func(n int) time.Duration {
	return func(n int) time.Duration {
		d := base
		for i := 0; i < n && d < time.Minute; i++ {
			d *= 2
		}
		return min(d, time.Minute)
	}
}
