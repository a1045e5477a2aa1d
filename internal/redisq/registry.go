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
)

// Registry timing: a worker refreshes its entry every registryBeat; an entry
// not refreshed for registryTTL disappears (the worker is gone).
const (
	registryBeat = 2 * time.Second
	registryTTL  = 10 * time.Second
)

// WorkerInfo is a live worker as it announces itself in Redis.
type WorkerInfo struct {
	ID        string    `json:"id"`
	Target    string    `json:"target"`
	Device    string    `json:"device"`
	Identity  string    `json:"identity"`
	Queue     string    `json:"queue"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
	// Current is the trial being evaluated (campaign/trial), if any.
	Current      string     `json:"current,omitempty"`
	CurrentSince *time.Time `json:"current_since,omitempty"`
	// Trials counts evaluations this worker finished.
	Trials int64 `json:"trials"`
	// MemoryBytes is the host memory the worker may use at most (its
	// cgroup limit, MemTotal or max_memory), for the scheduler's check that
	// some worker can hold a new campaign's model; 0 when unknown.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// MetricsAddr is where the worker serves /metrics (host:port), for
	// Prometheus service discovery through the scheduler.
	MetricsAddr string `json:"metrics_addr,omitempty"`
}

func registryPrefix(namespace string) string { return prefix(namespace) + "amk:worker:" }

// registration keeps one worker's registry entry fresh.
type registration struct {
	rdb  *redis.Client
	key  string
	mu   sync.Mutex
	info WorkerInfo
	quit chan struct{}
	done chan struct{}
}

func newRegistration(rdb *redis.Client, namespace string, info WorkerInfo) *registration {
	host, _ := os.Hostname()
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	info.Host, info.PID = host, os.Getpid()
	info.ID = fmt.Sprintf("%s:%d:%s", host, info.PID, hex.EncodeToString(nonce[:]))
	info.Started = time.Now().UTC()
	return &registration{rdb: rdb, key: registryPrefix(namespace) + info.ID, info: info}
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
				r.rdb.Del(context.Background(), r.key)
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
	return r.rdb.Set(ctx, r.key, b, registryTTL).Err()
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

// listWorkers reads every live registry entry of a namespace.
func listWorkers(ctx context.Context, rdb *redis.Client, namespace string) ([]WorkerInfo, error) {
	var keys []string
	iter := rdb.Scan(ctx, 0, registryPrefix(namespace)+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	vals, err := rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]WorkerInfo, 0, len(vals))
	for _, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // expired between SCAN and MGET
		}
		var info WorkerInfo
		if json.Unmarshal([]byte(s), &info) == nil {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
