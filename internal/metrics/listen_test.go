package metrics

import (
	"net"
	"strings"
	"testing"
)

func TestListenFallsBackToAFreePort(t *testing.T) {
	first, note, err := Listen("127.0.0.1:0")
	if err != nil || note != "" {
		t.Fatalf("free port: %v %q", err, note)
	}
	defer first.Close()
	second, note, err := Listen(first.Addr().String())
	if err != nil {
		t.Fatalf("taken port: %v", err)
	}
	defer second.Close()
	if second.Addr().String() == first.Addr().String() || !strings.Contains(note, "free port") {
		t.Fatalf("second listener %s (note %q), first %s", second.Addr(), note, first.Addr())
	}
	if !strings.HasPrefix(second.Addr().String(), "127.0.0.1:") {
		t.Fatalf("fallback changed the host: %s", second.Addr())
	}
}

func TestAdvertisedNamesTheHostForAWildcard(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4zero, Port: 9101}
	if got := Advertised(addr); strings.HasPrefix(got, "0.0.0.0") || !strings.HasSuffix(got, ":9101") {
		t.Fatalf("Advertised(%s) = %s", addr, got)
	}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9102}
	if got := Advertised(lo); got != "127.0.0.1:9102" {
		t.Fatalf("Advertised(%s) = %s", lo, got)
	}
}
