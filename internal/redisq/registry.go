package redisq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/control"
)

// Registry timing: a worker refreshes its entry every registryBeat; an entry
// not refreshed for registryTTL disappears (the worker is gone).
const (
	registryBeat = 2 * time.Second
	registryTTL  = 10 * time.Second
)

// WorkerInfo is a live worker as it announces itself in Redis: the HTTP
// API's worker record, which the scheduler serves as it is.
type WorkerInfo = control.Worker

func registryPrefix(namespace string) string { return prefix(namespace) + "amk:worker:" }

// registryIndex is the set of the ids of the namespace's registered
// workers: listing workers reads it instead of scanning the keyspace. A
// member whose entry expired is removed by the next listing.
func registryIndex(namespace string) string { return prefix(namespace) + "amk:workers" }

// registration keeps one worker's registry entry fresh.
type registration struct {
	rdb   *redis.Client
	key   string
	index string
	mu    sync.Mutex
	info  WorkerInfo
	// host, when set, is refreshed with every heartbeat.
	host *HostMemory
	quit chan struct{}
	done chan struct{}
}

func newRegistration(rdb *redis.Client, namespace, host string, info WorkerInfo) *registration {
	if host == "" {
		host, _ = os.Hostname()
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	info.Host, info.PID = host, os.Getpid()
	info.ID = fmt.Sprintf("%s:%d:%s", host, info.PID, hex.EncodeToString(nonce[:]))
	info.Started = time.Now().UTC()
	return &registration{rdb: rdb, key: registryPrefix(namespace) + info.ID, index: registryIndex(namespace), info: info}
}

func (r *registration) start(log *slog.Logger) {
	r.quit, r.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(registryBeat)
		defer t.Stop()
		failing := false
		for {
			err := r.beat()
			if err != nil && !failing {
				log.Warn("worker registry heartbeat failed", "err", err)
			}
			failing = err != nil
			select {
			case <-r.quit:
				ctx := context.Background()
				r.rdb.Del(ctx, r.key)
				r.rdb.SRem(ctx, r.index, r.snapshot().ID)
				if r.host != nil {
					r.rdb.HDel(ctx, r.host.key, r.host.id)
				}
				return
			case <-t.C:
			}
		}
	}()
}

func (r *registration) stop() {
	if r.quit == nil {
		return
	}
	close(r.quit)
	<-r.done
	r.quit = nil
}

func (r *registration) beat() error {
	info := r.snapshot()
	info.Heartbeat = time.Now().UTC()
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), registryBeat)
	defer cancel()
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, r.key, b, registryTTL)
		p.SAdd(ctx, r.index, info.ID)
		if r.host != nil {
			return r.host.refresh(ctx, p)
		}
		return nil
	})
	return err
}

func (r *registration) snapshot() WorkerInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.info
}

func (r *registration) begin(key string) {
	now := time.Now().UTC()
	r.mu.Lock()
	r.info.Current, r.info.CurrentSince = key, &now
	r.mu.Unlock()
}

func (r *registration) end() {
	r.mu.Lock()
	r.info.Current, r.info.CurrentSince = "", nil
	r.info.Trials++
	r.mu.Unlock()
}

// listWorkers reads every live registry entry of a namespace: the workers
// the index names whose entry has not expired. Index members whose entry
// expired (the worker died without deregistering) are removed on the way.
// Its cost follows the number of workers, never the number of keys in Redis
// (a keyspace SCAN would walk every retained trial task).
func listWorkers(ctx context.Context, rdb *redis.Client, namespace string) ([]WorkerInfo, error) {
	ids, err := rdb.SMembers(ctx, registryIndex(namespace)).Result()
	if err != nil {
		return nil, err
	}
	found, err := workerInfos(ctx, rdb, namespace, ids...)
	if err != nil {
		return nil, err
	}
	var gone []any
	out := make([]WorkerInfo, 0, len(found))
	for _, id := range ids {
		if info, ok := found[id]; ok {
			out = append(out, info)
		} else {
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		// An entry that expires between the MGET and this SREM belongs to a
		// worker that is gone anyway; a worker that beats again re-adds it.
		_ = rdb.SRem(ctx, registryIndex(namespace), gone...).Err()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// workerInfos reads the live registry entries of the workers ids, by id;
// an id with no live entry is absent from the map.
func workerInfos(ctx context.Context, rdb *redis.Client, namespace string, ids ...string) (map[string]WorkerInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = registryPrefix(namespace) + id
	}
	vals, err := rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]WorkerInfo, len(vals))
	for _, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // expired or never there
		}
		var info WorkerInfo
		if json.Unmarshal([]byte(s), &info) == nil && info.ID != "" {
			out[info.ID] = info
		}
	}
	return out, nil
}
