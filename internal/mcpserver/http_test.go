package mcpserver

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
)

// bearer adds the token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func TestStreamableHTTPNeedsTheToken(t *testing.T) {
	local, err := control.OpenLocal(filepath.Join(t.TempDir(), "ws"), true, flywheel.Env{AMKVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Campaigns: control.New(local), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, short := range []string{"  ", "a", "ab", "abc", " abc ", "1234567"} {
		if _, err := srv.HTTPHandler(short); err == nil {
			t.Fatalf("a handler with the token %q", short)
		}
	}
	handler, err := srv.HTTPHandler("s3cret-token")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(handler)
	defer ts.Close()

	for _, auth := range []string{"", "Bearer wrong", "s3cret-token"} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: status %d", auth, resp.StatusCode)
		}
	}

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "amk-test", Version: "test"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: bearer{"s3cret-token", http.DefaultTransport}}}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "eval", Arguments: map[string]any{"model": "toy", "gpu": "h200"}})
	if err != nil || res.IsError {
		t.Fatalf("eval over HTTP: %v %+v", err, res)
	}
	if v, _ := res.StructuredContent.(map[string]any); v["ok"] != true || v["gpu"] != "h200" {
		t.Fatalf("eval over HTTP answered %v", res.StructuredContent)
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8765", "[::1]:0", "localhost:9"} {
		if err := CheckLoopback(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:8765", ":8765", "10.1.2.3:80", "example.com:80", "127.0.0.1"} {
		if err := CheckLoopback(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func FuzzParseResource(f *testing.F) {
	for _, s := range []string{"amk://campaigns/toy-h100-cpu/report.md", "amk://campaigns/../x/results.tsv", "amk://campaigns//report.md", "file:///etc/passwd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		id, name, err := parseResource(uri)
		if err != nil {
			return
		}
		if strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") || (name != reportName && name != resultsName) {
			t.Fatalf("%q parsed to %q %q", uri, id, name)
		}
	})
}
