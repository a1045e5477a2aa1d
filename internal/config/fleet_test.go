package config

import (
	"slices"
	"strings"
	"testing"
)

func TestSentinelSettings(t *testing.T) {
	cleanEnv(t)
	w, err := workerFrom(t, "--target", "h100", "--redis-sentinels", "127.0.0.1:26379, 127.0.0.1:26380", "--redis-sentinel-master", "amk")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.Redis.SentinelAddrs, []string{"127.0.0.1:26379", "127.0.0.1:26380"}) || w.Redis.SentinelMaster != "amk" {
		t.Fatalf("sentinels %q master %q", w.Redis.SentinelAddrs, w.Redis.SentinelMaster)
	}
	conn, err := w.Redis.Conn()
	if err != nil || !strings.HasPrefix(conn.String(), "sentinel:amk@") {
		t.Fatalf("conn %s %v", conn, err)
	}
	if _, err := workerFrom(t, "--target", "h100", "--redis-sentinels", "127.0.0.1:26379"); !slices.Contains(keys(err), "redis.sentinel_addrs") {
		t.Fatalf("sentinels without a master: %v", err)
	}
	if _, err := workerFrom(t, "--target", "h100", "--redis", "127.0.0.1:6379", "--redis-sentinel-master", "amk"); !slices.Contains(keys(err), "redis.sentinel_master") {
		t.Fatalf("a master without sentinels: %v", err)
	}
}

func TestFleetSecret(t *testing.T) {
	cleanEnv(t)
	file := writeFile(t, "secret", "0123456789abcdef0123\n")
	w, err := workerFrom(t, "--target", "h100", "--redis", "127.0.0.1:6379", "--fleet-secret-file", file)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := w.Redis.Secret(); err != nil || string(s) != "0123456789abcdef0123" {
		t.Fatalf("secret %q %v", s, err)
	}
	if strings.Contains(w.String(), "0123456789abcdef") {
		t.Fatalf("the secret is logged: %s", w)
	}
	t.Setenv("AMK_REDIS_FLEET_SECRET", "short")
	w, err = workerFrom(t, "--target", "h100", "--redis", "127.0.0.1:6379")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Redis.Secret(); !slices.Contains(keys(err), "redis.fleet_secret") {
		t.Fatalf("a short secret: %v", err)
	}
	if strings.Contains(w.String(), "short") {
		t.Fatalf("the secret is logged: %s", w)
	}
}

func TestMetricsListenFollowsTheDevice(t *testing.T) {
	for _, c := range []struct{ device, listen, want string }{
		{"cpu", DefaultWorkerListen, DefaultWorkerListen},
		{"emu", DefaultWorkerListen, DefaultWorkerListen},
		{"0", DefaultWorkerListen, "127.0.0.1:9101"},
		{"3", DefaultWorkerListen, "127.0.0.1:9104"},
		{"3", "0.0.0.0:9200", "0.0.0.0:9200"},
	} {
		w := Worker{Device: c.device, Listen: c.listen}
		if got := w.MetricsListen(); got != c.want {
			t.Errorf("device %s listen %s: %s, want %s", c.device, c.listen, got, c.want)
		}
	}
}

func TestWorkerDeviceKinds(t *testing.T) {
	for _, c := range []struct {
		device        string
		ordinal       int
		cpu, emulated bool
	}{{"cpu", 0, true, false}, {"emu", 0, false, true}, {"2", 2, false, false}, {"cuda:1", 1, false, false}} {
		w := Worker{Device: c.device}
		n, cpu, err := w.DeviceOrdinal()
		if err != nil || n != c.ordinal || cpu != c.cpu || w.Emulated() != c.emulated {
			t.Errorf("device %q: ordinal %d cpu %v emulated %v (%v)", c.device, n, cpu, w.Emulated(), err)
		}
	}
	for _, bad := range []string{"gpu", "emu:0", "-1", ""} {
		if _, _, err := (Worker{Device: bad}).DeviceOrdinal(); err == nil || !strings.Contains(err.Error(), "not cpu, emu or a CUDA device ordinal") {
			t.Errorf("device %q: %v", bad, err)
		}
	}
}
