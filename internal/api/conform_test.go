package api_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/amk-dev/amk/control/controltest"
	"github.com/amk-dev/amk/internal/apitest"
	"github.com/amk-dev/amk/internal/redistest"
)

// The client, across the HTTP server, to a fleet whose trials go through a
// real redis-server to a worker, passes the control plane's suite: what
// amkctl --server and the MCP server's remote mode talk to.
func TestClientServerFleetConforms(t *testing.T) {
	srv := redistest.Start(t)
	var namespaces atomic.Int64
	controltest.Run(t, func(t *testing.T) controltest.Target {
		ns := fmt.Sprintf("conform%d", namespaces.Add(1))
		s := apitest.Start(t, apitest.Options{Fleet: apitest.RedisFleet(t, srv.Addr, ns, "h200")})
		client := s.Client(t)
		return controltest.Target{Service: client, Driven: true, LocalFiles: true, Workers: true}
	})
}
