package redisq

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
)

// roundTripPoll is the poll interval of BenchmarkRoundTrip's workers: short,
// so that the round trip shows the transport's own cost rather than the
// wait for an idle worker's next poll (BenchmarkIdleWorkers measures that).
const roundTripPoll = 2 * time.Millisecond

// BenchmarkRoundTrip measures the orchestration overhead with a no-op
// evaluator on loopback Redis: the per-trial round trip Submit → worker →
// outcome received, one trial at a time (p50-ms, p99-ms), and the rate with
// b.N trials submitted at once (trials/s), for 1, 2 and 4 workers.
func BenchmarkRoundTrip(b *testing.B) {
	srv := redistest.Start(b)
	noop := func(ctx context.Context, spec trial.Spec) trial.Outcome { return okVerdict(spec) }
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			ns := freshNamespace(b)
			for i := range workers {
				startWorker(b, srv, ns, fmt.Sprintf("w%d", i), noop, func(o *WorkerOptions) { o.PollInterval = roundTripPoll })
			}
			d := startDispatcher(b, srv, ns, DispatcherOptions{PollInterval: roundTripPoll})
			ctx := context.Background()
			roundTrip := func(campaign string, id int) time.Duration {
				start := time.Now()
				if err := d.Submit(ctx, dispatchtest.Spec(campaign, id)); err != nil {
					b.Fatal(err)
				}
				next(b, d, 10*time.Second)
				return time.Since(start)
			}
			for i := range 20 { // warm up connections and scripts
				roundTrip("warm", i)
			}
			b.ResetTimer()
			lat := make([]time.Duration, b.N)
			for i := range lat {
				lat[i] = roundTrip("seq", i)
			}
			start := time.Now()
			go func() {
				for i := 0; i < b.N; i++ {
					if err := d.Submit(ctx, dispatchtest.Spec("burst", i)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			for i := 0; i < b.N; i++ {
				next(b, d, 30*time.Second)
			}
			rate := float64(b.N) / time.Since(start).Seconds()
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			b.ReportMetric(rate, "trials/s")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// idlePollIntervalsEnv overrides the poll intervals BenchmarkIdleWorkers
// tries (comma-separated durations).
const idlePollIntervalsEnv = "AMK_IDLE_POLL_INTERVALS"

// BenchmarkIdleWorkers measures what idle workers cost Redis and how long a
// trial waits for one of them, for several poll intervals and fleet sizes:
// idle-redis-cpu-% is redis-server's CPU (INFO cpu) over 3 s with the
// workers started and no trial anywhere; p50-ms and p99-ms are the round
// trip Submit → outcome of b.N trials submitted one at a time at random
// moments, each to an idle fleet (the wait for an idle worker's next poll
// dominates it; with one worker it is the wait a trial has when every other
// worker is busy). Each size runs against its own redis-server, the
// workers in this process.
func BenchmarkIdleWorkers(b *testing.B) {
	intervals := []time.Duration{2 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, time.Second}
	if v := os.Getenv(idlePollIntervalsEnv); v != "" {
		intervals = nil
		for f := range strings.SplitSeq(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil || d <= 0 {
				b.Fatalf("%s=%q: want positive durations", idlePollIntervalsEnv, v)
			}
			intervals = append(intervals, d)
		}
	}
	noop := func(ctx context.Context, spec trial.Spec) trial.Outcome { return okVerdict(spec) }
	for _, workers := range []int{1, 64, 256} {
		for _, poll := range intervals {
			b.Run(fmt.Sprintf("workers=%d/poll=%v", workers, poll), func(b *testing.B) {
				srv := redistest.Start(b)
				ns := freshNamespace(b)
				for i := range workers {
					startWorker(b, srv, ns, fmt.Sprintf("w%d", i), noop, func(o *WorkerOptions) { o.PollInterval = poll })
				}
				d := startDispatcher(b, srv, ns, DispatcherOptions{PollInterval: poll})
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
				b.Cleanup(func() { _ = rdb.Close() })
				ctx := context.Background()
				time.Sleep(time.Second + 2*poll) // past the servers' start-up writes
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				const window = 3 * time.Second
				from := redisCPUTime(b, rdb)
				time.Sleep(window)
				idle := float64(redisCPUTime(b, rdb)-from) / float64(window) * 100
				b.Logf("Redis commands while idle, calls/s:%s", topCommands(b, rdb, window))
				b.ResetTimer()
				lat := make([]time.Duration, b.N)
				for i := range lat {
					time.Sleep(time.Duration(rand.Int64N(int64(2*poll))) + 5*time.Millisecond)
					start := time.Now()
					if err := d.Submit(ctx, dispatchtest.Spec("idle", i)); err != nil {
						b.Fatal(err)
					}
					next(b, d, 10*time.Second+4*poll)
					lat[i] = time.Since(start)
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(idle, "idle-redis-cpu-%")
				b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
				b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			})
		}
	}
}

// redisCPUTime is redis-server's user+system CPU so far.
func redisCPUTime(b *testing.B, rdb *redis.Client) time.Duration {
	d, err := redistest.CPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// topCommands lists the commands Redis ran most often since its stats were
// reset, as calls per second over window.
func topCommands(b *testing.B, rdb *redis.Client, window time.Duration) string {
	stats, err := redistest.CommandStats(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	slices.SortFunc(stats, func(x, y redistest.CommandStat) int { return cmp.Compare(y.Calls, x.Calls) })
	var out strings.Builder
	for _, st := range stats[:min(8, len(stats))] {
		fmt.Fprintf(&out, " %s %.0f", st.Name, st.Calls/window.Seconds())
	}
	return out.String()
}
