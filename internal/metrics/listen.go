package metrics

import (
	"fmt"
	"net"
	"os"
)

// Listen opens the listener of a /metrics endpoint at addr. When addr
// cannot be bound (another worker on the host holds the port, say) it falls
// back to a free port on the same host, and note says so: a daemon never
// stops because of its metrics endpoint. err is set only when not even a
// free port could be had.
func Listen(addr string) (ln net.Listener, note string, err error) {
	ln, err = net.Listen("tcp", addr)
	if err == nil {
		return ln, "", nil
	}
	host, _, serr := net.SplitHostPort(addr)
	if serr != nil {
		host = "127.0.0.1"
	}
	ln, ferr := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if ferr != nil {
		return nil, "", fmt.Errorf("metrics listener %s: %v; no free port either: %w", addr, err, ferr)
	}
	return ln, fmt.Sprintf("%s is not available (%v); serving on free port %s instead", addr, err, ln.Addr()), nil
}

// Advertised is how another host reaches a listener bound to addr: an
// unspecified host (0.0.0.0, ::) becomes this host's name.
func Advertised(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return net.JoinHostPort(host, port)
}
