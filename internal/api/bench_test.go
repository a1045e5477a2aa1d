package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkStatusJSON is one GET /v1/campaigns/{id} through the handlers.
func BenchmarkStatusJSON(b *testing.B) {
	h, err := NewServer(Options{Service: newStub(b), Token: "bench-token"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/campaigns/toy-h200-cpu", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkCommand is one authorised POST .../pause (decoded, applied).
func BenchmarkCommand(b *testing.B) {
	h, err := NewServer(Options{Service: newStub(b), Token: "bench-token"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/campaigns/toy-h200-cpu/pause", strings.NewReader(`{"note": "bench"}`))
		req.Header.Set("Authorization", "Bearer bench-token")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}
