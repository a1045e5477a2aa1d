package redisq

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisLogger routes go-redis's internal log lines (connection pool
// failures) into slog instead of the standard logger.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	outageLog(r).Warn(lineKind("go-redis", msg), msg, "component", "go-redis")
}

// RouteRedisLogs sends go-redis's process-wide log output to l. go-redis has
// one global logger, so daemons call this once at startup.
func RouteRedisLogs(l *slog.Logger) { redis.SetLogger(redisLogger{orDiscard(l)}) }
