package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// InfoField reads one numeric field of an INFO section ("cpu",
// "used_cpu_user").
func InfoField(ctx context.Context, rdb *redis.Client, section, field string) (float64, error) {
	text, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO %s: %s: %v", section, field, err)
			}
			return f, nil
		}
	}
	return 0, fmt.Errorf("INFO %s has no %s", section, field)
}

// CPU is the server's user plus system CPU time so far (INFO cpu).
func CPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	var sum float64
	for _, field := range []string{"used_cpu_user", "used_cpu_sys"} {
		s, err := InfoField(ctx, rdb, "cpu", field)
		if err != nil {
			return 0, err
		}
		sum += s
	}
	return time.Duration(sum * float64(time.Second)), nil
}

// CommandStat is one command's line of INFO commandstats: how often it ran
// and the CPU time it took, since the start or the last CONFIG RESETSTAT.
type CommandStat struct {
	Name  string
	Calls float64
	Usec  float64
}

// CommandStats reads INFO commandstats.
func CommandStats(ctx context.Context, rdb *redis.Client) ([]CommandStat, error) {
	text, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	var stats []CommandStat
	for line := range strings.SplitSeq(text, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		st := CommandStat{Name: strings.TrimPrefix(name, "cmdstat_")}
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				st.Calls = x
			case "usec":
				st.Usec = x
			}
		}
		stats = append(stats, st)
	}
	return stats, nil
}
