package redisq

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
)

// deployACL is the ACL rule deploy/README.md gives the fleet's Redis user:
// the amk and asynq keys and channels, no administrative or dangerous
// commands beyond the few asynq's inspector reads.
const deployACL = "on >fleet-pass ~asynq:* ~amk:* ~*:amk:* &asynq:* &amk:* &*:amk:* +@all -@dangerous +info +memory|usage"

// The ACL of the deployment docs is enough for a scheduler and a worker to
// run trials (and forbids what they do not need).
func TestFleetRunsUnderTheDocumentedACL(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	args := []any{"ACL", "SETUSER", "amk-fleet"}
	for f := range strings.FieldsSeq(deployACL) {
		args = append(args, f)
	}
	if err := admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	ns := freshNamespace(t)
	conn := Conn{Addr: srv.Addr, Username: "amk-fleet", Password: "fleet-pass"}
	d, err := NewDispatcher(context.Background(), DispatcherOptions{Conn: conn, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var calls atomic.Int64
	startWorker(t, srv, ns, "w", dispatchtest.EchoEvaluator(&calls), func(o *WorkerOptions) { o.Conn = conn })
	if err := d.Submit(context.Background(), dispatchtest.Spec("acl", 1)); err != nil {
		t.Fatal(err)
	}
	if o := next(t, d, 20*time.Second); o.Verdict == nil {
		t.Fatalf("got %+v", o)
	}
	if _, err := d.Queues(); err != nil {
		t.Fatalf("queue stats under the ACL: %v", err)
	}
	user := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "amk-fleet", Password: "fleet-pass"})
	defer user.Close()
	if err := user.FlushAll(context.Background()).Err(); err == nil {
		t.Fatal("the fleet user may FLUSHALL")
	}
	if err := user.Set(context.Background(), "other:key", "x", 0).Err(); err == nil {
		t.Fatal("the fleet user may write keys outside amk's")
	}
}
