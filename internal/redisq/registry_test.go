package redisq

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/internal/redistest"
)

// Listing workers and the lost-worker check read the registry index and the
// entries it names; they never walk the keyspace, which holds every trial
// task kept for the retention period.
func TestWorkerRegistryReadsNoKeyspace(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	// Retained trials stand-in: many keys that are not workers.
	pipe := admin.Pipeline()
	for i := range 5000 {
		pipe.Set(ctx, fmt.Sprintf("%s:amk:done:c/%d", ns, i), "x", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var calls dispatchtestCalls
	w := startWorker(t, srv, ns, "indexed", calls.eval(), nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ws, err := d.Workers(ctx)
	if err != nil || len(ws) != 1 || ws[0].ID != w.Info().ID {
		t.Fatalf("workers = %+v, %v; want the one worker", ws, err)
	}
	// A running marker of that worker makes the lost-worker check read
	// its registry entry.
	if err := admin.HSet(ctx, runningKey(ns), "c/1", fmt.Sprintf(`{"worker":%q,"since":%q}`, w.Info().ID, time.Now().UTC().Format(time.RFC3339Nano))).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.checkLost(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if d.LostWorkers() != 0 {
		t.Fatal("a live worker's trial was taken back")
	}
	stats, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stats, "cmdstat_scan:") || strings.Contains(stats, "cmdstat_keys:") {
		t.Fatalf("the registry walked the keyspace:\n%s", stats)
	}
}

// A worker that died without deregistering (its entry expired) is no
// longer listed, and the index forgets it.
func TestWorkerRegistryIndexDropsExpiredEntries(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	var calls dispatchtestCalls
	w := startWorker(t, srv, ns, "dies", calls.eval(), nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	id := w.Info().ID
	if ok, err := admin.SIsMember(ctx, registryIndex(ns), id).Result(); err != nil || !ok {
		t.Fatalf("worker %s not in the index (%v)", id, err)
	}
	w.reg.stop()                           // no more heartbeats...
	admin.SAdd(ctx, registryIndex(ns), id) // ...and, as after a kill, still indexed
	if ws, err := d.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("workers = %+v, %v; want none", ws, err)
	}
	if ok, _ := admin.SIsMember(ctx, registryIndex(ns), id).Result(); ok {
		t.Fatal("the index still names the dead worker")
	}
}
