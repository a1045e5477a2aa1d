package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The INFO readers see what a client just did: the PINGs it sent, the
// memory it used, a CPU time that does not go backwards; an unknown field
// is an error, not a zero.
func TestInfoReaders(t *testing.T) {
	srv := Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := CPU(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := CommandStats(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	pings := 0.0
	for _, st := range stats {
		if st.Name == "ping" {
			pings = st.Calls
		}
	}
	if pings != 5 {
		t.Fatalf("commandstats counts %v pings, want 5 (%+v)", pings, stats)
	}
	if after, err := CPU(ctx, rdb); err != nil || after < before {
		t.Fatalf("CPU went from %v to %v (%v)", before, after, err)
	}
	if mem, err := InfoField(ctx, rdb, "memory", "used_memory"); err != nil || mem <= 0 {
		t.Fatalf("used_memory %v (%v)", mem, err)
	}
	if _, err := InfoField(ctx, rdb, "memory", "no_such_field"); err == nil {
		t.Fatal("an unknown INFO field read without an error")
	}
}
