package mcpserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/control"
)

// MaxMessageBytes bounds one message a client sends: the body of one HTTP
// request, one line on stdio.
const MaxMessageBytes = 8 << 20

// CheckLoopback refuses a listen address that is not on loopback: the
// HTTP transport is for agents on this machine.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %v (want 127.0.0.1:PORT)", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("listen address %q is not on loopback (127.0.0.1, ::1 or localhost): amkctl mcp serves agents on this machine only", addr)
}

// HTTPHandler serves the server over MCP's streamable HTTP transport to
// clients that send "Authorization: Bearer <token>" (the scheduler's API
// token); others get 401.
func (s *Server) HTTPHandler(token string) (http.Handler, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, errors.New("the HTTP transport needs a token (--token, --token-file, AMK_TOKEN or the scheduler's token file)")
	}
	if err := control.CheckAPIToken(token); err != nil {
		return nil, err
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="amk"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxMessageBytes)
		mcpHandler.ServeHTTP(w, r)
	}), nil
}
