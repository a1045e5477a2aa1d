package redisq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/trial"
)

// Two workers of one host probe the same free memory, which has room for
// one copy of a model: the first admits it, the second is refused while
// the first holds it and has not allocated it; once the first has it
// resident (the probe then shows it gone) or lets it go, the second is
// admitted; a killed worker's reservation stops counting when its lease
// runs out.
func TestWorkersOfOneHostShareOneMemoryBudget(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	cfg, err := model.Load("toy")
	if err != nil {
		t.Fatal(err)
	}
	need := trial.EstimateMemory(cfg, false, 0).Host
	available := func() (int64, string, error) { return need + need/2, "MemAvailable", nil }
	var residentA atomic.Int64
	idle := func(ctx context.Context, spec trial.Spec) trial.Outcome { return okVerdict(spec) }
	a := startWorker(t, srv, ns, "A", idle, func(o *WorkerOptions) {
		o.Host = "gpu-host-1"
		o.Resident = func() (int64, error) { return residentA.Load(), nil }
	})
	b := startWorker(t, srv, ns, "B", idle, func(o *WorkerOptions) { o.Host = "gpu-host-1" })
	other := startWorker(t, srv, ns, "C", idle, func(o *WorkerOptions) { o.Host = "gpu-host-2" })
	cache := func(w *Worker) *trial.ModelCache {
		return trial.NewModelCache(0).KeepUnused(0).WithMemoryProbe(available).WithHostAdmission(w.HostMemory())
	}
	cacheA, cacheB, cacheC := cache(a), cache(b), cache(other)

	if _, err := cacheA.Get("toy", ""); err != nil {
		t.Fatalf("first worker of the host refused: %v", err)
	}
	_, err = cacheB.Get("toy", "")
	var memErr *trial.MemoryError
	if !errors.As(err, &memErr) || memErr.HeldByOthers != need || !strings.Contains(err.Error(), "other evaluators of this host") {
		t.Fatalf("second worker of the host: %v, want refused for the %d bytes the first holds", err, need)
	}
	if _, err := cacheC.Get("toy", ""); err != nil {
		t.Fatalf("a worker of another host refused: %v", err)
	}

	// The first worker's model is resident: the probe shows it, so it no
	// longer counts against the others.
	residentA.Store(need)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if err := a.HostMemory().refresh(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	if ok, others := b.HostMemory().Admit(need, need+need/2); !ok || others != 0 {
		t.Fatalf("after the first worker allocated: admitted=%v held by others %d, want true 0", ok, others)
	}
	b.HostMemory().Release(need)

	// A worker killed while holding a reservation: it counts until its
	// lease ends, then not.
	key := hostMemoryKey(ns, "gpu-host-1")
	now := time.Now()
	for id, until := range map[string]time.Time{"killed-live": now.Add(time.Minute), "killed-expired": now.Add(-time.Second)} {
		if err := rdb.HSet(context.Background(), key, id, fmt.Sprintf("%d:0:%d", need, until.UnixMilli())).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if ok, others := b.HostMemory().Admit(need, 10*need); !ok || others != need {
		t.Fatalf("with one live and one expired reservation: admitted=%v held by others %d, want true %d", ok, others, need)
	}
	if n, _ := rdb.HExists(context.Background(), key, "killed-expired").Result(); n {
		t.Fatal("the expired reservation was not removed")
	}
}
