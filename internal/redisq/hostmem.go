package redisq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Host memory admission.
//
// Every worker of a host probes the same free memory (MemAvailable), so two
// workers that check a model at the same moment would both admit one only
// a single copy of fits. The workers of one host therefore keep a shared
// ledger in Redis: a hash per host, one field per worker holding the bytes
// it was admitted (its models' EstimateMemory host figures), its resident
// size and when its lease ends. A worker admits a model only when the model
// fits in its own probe's figure less what the host's other workers were
// admitted and have not allocated yet (admitted minus resident: memory they
// hold already shows in the probe); the check and the reservation are one
// Lua script, so two admissions on one host are ordered. A worker refreshes
// its field with its registry heartbeat; a field whose lease ran out (the
// worker was killed) no longer counts and is removed by the next admission.

// hostMemoryKey is the ledger of one host's workers.
func hostMemoryKey(namespace, host string) string { return prefix(namespace) + "amk:hostmem:" + host }

// hostMemoryLease is how long a worker's field counts without a refresh:
// a registry entry's lifetime.
const hostMemoryLease = registryTTL

// admitScript: KEYS[1] the host's ledger; ARGV: worker id, need, available,
// now (ms), lease (ms), the worker's admitted bytes once need is added, its
// resident bytes. Returns {1 admitted | 0 refused, bytes held by others}.
var admitScript = redis.NewScript(`
local now = tonumber(ARGV[4])
local need, available = tonumber(ARGV[2]), tonumber(ARGV[3])
local others = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if fields[i] ~= ARGV[1] then
    local admitted, resident, untilMs = string.match(fields[i+1], '^(%d+):(%d+):(%d+)$')
    if not admitted or tonumber(untilMs) < now then
      redis.call('HDEL', KEYS[1], fields[i])
    else
      others = others + math.max(0, tonumber(admitted) - tonumber(resident))
    end
  end
end
if need > available - others then
  return {0, others}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[6] .. ':' .. ARGV[7] .. ':' .. (now + tonumber(ARGV[5])))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[5]))
return {1, others}`)

// HostMemory is one worker's side of its host's memory ledger: a
// trial.HostAdmission for its model cache.
type HostMemory struct {
	rdb      *redis.Client
	key      string
	id       string
	resident func() (int64, error)
	outage   outageLog

	mu       sync.Mutex
	admitted int64
}

func newHostMemory(rdb *redis.Client, namespace, host, id string, resident func() (int64, error), outage outageLog) *HostMemory {
	return &HostMemory{rdb: rdb, key: hostMemoryKey(namespace, host), id: id, resident: resident, outage: outage}
}

// Admit reserves need bytes for this worker when need fits in available
// less what the host's other workers were admitted and have not allocated
// yet. Without Redis the check is this worker's alone (available), and the
// reservation is published with the next heartbeat.
func (h *HostMemory) Admit(need, available int64) (ok bool, heldByOthers int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := admitScript.Run(ctx, h.rdb, []string{h.key}, h.id, need, available,
		time.Now().UnixMilli(), hostMemoryLease.Milliseconds(), h.admitted+need, h.residentBytes()).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("admission script answered %v", res)
	}
	if err != nil {
		h.outage.Warn("host_memory", "host memory ledger unreachable; admitting on this worker's own figure", "err", err)
		ok = need <= available
	} else {
		ok, heldByOthers = res[0] == 1, res[1]
	}
	if ok {
		h.admitted += need
	}
	return ok, heldByOthers
}

// Release gives back bytes an earlier Admit reserved.
func (h *HostMemory) Release(bytes int64) {
	h.mu.Lock()
	h.admitted = max(h.admitted-bytes, 0)
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.refresh(ctx, h.rdb); err != nil {
		h.outage.Warn("host_memory", "could not update the host memory ledger", "err", err)
	}
}

// Admitted is the memory this worker holds admitted.
func (h *HostMemory) Admitted() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.admitted
}

// refresh writes this worker's field (admitted, resident, a new lease), or
// removes it when nothing is admitted.
func (h *HostMemory) refresh(ctx context.Context, c redis.Cmdable) error {
	h.mu.Lock()
	admitted := h.admitted
	h.mu.Unlock()
	if admitted == 0 {
		return c.HDel(ctx, h.key, h.id).Err()
	}
	value := fmt.Sprintf("%d:%d:%d", admitted, h.residentBytes(), time.Now().Add(hostMemoryLease).UnixMilli())
	if err := c.HSet(ctx, h.key, h.id, value).Err(); err != nil {
		return err
	}
	return c.PExpire(ctx, h.key, hostMemoryLease).Err()
}

// residentBytes is this worker's resident size (0 when unknown: all it was
// admitted counts as not yet allocated, the cautious side).
func (h *HostMemory) residentBytes() int64 {
	if h.resident == nil {
		return 0
	}
	n, err := h.resident()
	if err != nil || n < 0 {
		return 0
	}
	return n
}
