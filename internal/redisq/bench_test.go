package redisq

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
)

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
			for i := 0; i < workers; i++ {
				startWorker(b, srv, ns, fmt.Sprintf("w%d", i), noop, nil)
			}
			d := startDispatcher(b, srv, ns, DispatcherOptions{})
			ctx := context.Background()
			roundTrip := func(campaign string, id int) time.Duration {
				start := time.Now()
				if err := d.Submit(ctx, dispatchtest.Spec(campaign, id)); err != nil {
					b.Fatal(err)
				}
				next(b, d, 10*time.Second)
				return time.Since(start)
			}
			for i := 0; i < 20; i++ { // warm up connections and scripts
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
