package redisq

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// DefaultOutageLogEvery is the least time between two log lines of one kind
// about Redis being unreachable, per process (SetOutageLogEvery changes it).
const DefaultOutageLogEvery = 10 * time.Second

// outageGate rate-limits the lines a Redis outage makes every component of
// a process write (asynq's servers, go-redis's pool, heartbeats, sweeps):
// one line per kind per interval, the next one saying how many were
// suppressed in between. It is process-wide because go-redis's logger is.
var outageGate = &gate{every: DefaultOutageLogEvery, kinds: map[string]*gateKind{}}

// SetOutageLogEvery sets the outage log interval of this process (<= 0:
// every line is written).
func SetOutageLogEvery(d time.Duration) {
	outageGate.mu.Lock()
	outageGate.every = d
	outageGate.mu.Unlock()
}

type gate struct {
	mu    sync.Mutex
	every time.Duration
	now   func() time.Time // time.Now when nil
	kinds map[string]*gateKind
}

type gateKind struct {
	last       time.Time
	suppressed int
}

// allow reports whether a line of kind may be written now and how many
// lines of that kind were suppressed since the last one written.
func (g *gate) allow(kind string) (ok bool, suppressed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if g.now != nil {
		now = g.now()
	}
	k := g.kinds[kind]
	if k == nil {
		k = &gateKind{}
		g.kinds[kind] = k
	}
	if g.every > 0 && !k.last.IsZero() && now.Sub(k.last) < g.every {
		k.suppressed++
		return false, 0
	}
	k.last, suppressed, k.suppressed = now, k.suppressed, 0
	return true, suppressed
}

// outageLog writes rate-limited warnings through a logger.
type outageLog struct{ l *slog.Logger }

// Warn logs msg at warn level unless a line of kind was written within the
// interval.
func (o outageLog) Warn(kind, msg string, args ...any) { o.log(slog.LevelWarn, kind, msg, args...) }

func (o outageLog) log(level slog.Level, kind, msg string, args ...any) {
	ok, suppressed := outageGate.allow(kind)
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	o.l.Log(context.Background(), level, msg, args...)
}

// lineKind is the rate-limit kind of a free-text line: its text up to the
// first colon (asynq and go-redis write "<what failed>: <error>"), digits
// removed so addresses and counts do not split one kind into many.
func lineKind(component, text string) string {
	head, _, _ := strings.Cut(text, ":")
	head = strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, head)
	if len(head) > 80 {
		head = head[:80]
	}
	return component + ":" + head
}

// asynqLogger routes asynq's own log lines into slog; its warnings and
// errors (mostly about Redis being away) are rate-limited per kind.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.limited(slog.LevelWarn, fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.limited(slog.LevelError, fmt.Sprint(args...)) }

// Fatal logs at error level; a library never exits the process.
func (a asynqLogger) Fatal(args ...any) { a.limited(slog.LevelError, fmt.Sprint(args...)) }

func (a asynqLogger) limited(level slog.Level, msg string) {
	outageLog(a).log(level, lineKind("asynq", msg), msg, "component", "asynq")
}

var _ asynq.Logger = asynqLogger{}

// orDiscard returns l, or a logger that drops everything when l is nil.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
