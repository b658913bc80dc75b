package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestBearerToken(t *testing.T) {
	for _, tt := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer  abc ", "abc", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
	} {
		if token, ok := bearerToken(tt.header); token != tt.token || ok != tt.ok {
			t.Errorf("%q: %q %v, want %q %v", tt.header, token, ok, tt.token, tt.ok)
		}
	}
}

// Decisions are cached by token, verb and path; errors are not cached.
func TestGuardCachesDecisions(t *testing.T) {
	calls := 0
	fail := false
	g := &guard{decisions: map[[32]byte]decision{}, review: func(_ context.Context, token, verb, path string) (int, error) {
		calls++
		if fail {
			return 0, errors.New("API server down")
		}
		if token == "good" && verb == "get" && path == "/metrics" {
			return http.StatusOK, nil
		}
		return http.StatusForbidden, nil
	}}
	req := func(method, path, token string) *http.Request {
		r := httptest.NewRequest(method, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return r
	}
	for _, tt := range []struct {
		r     *http.Request
		code  int
		calls int
	}{
		{req("GET", "/metrics", ""), http.StatusUnauthorized, 0},
		{req("GET", "/metrics", "good"), http.StatusOK, 1},
		{req("GET", "/metrics", "good"), http.StatusOK, 1},
		{req("POST", "/metrics", "good"), http.StatusForbidden, 2},
		{req("GET", "/metrics", "other"), http.StatusForbidden, 3},
	} {
		if code, err := g.check(tt.r); code != tt.code || err != nil || calls != tt.calls {
			t.Errorf("%s %s: %d %v after %d calls, want %d after %d", tt.r.Method, tt.r.Header.Get("Authorization"), code, err, calls, tt.code, tt.calls)
		}
	}
	fail = true
	for range 2 {
		if code, err := g.check(req("GET", "/metrics", "new")); code != http.StatusInternalServerError || err == nil {
			t.Errorf("API server down: %d %v", code, err)
		}
	}
	if calls != 5 {
		t.Errorf("%d calls, want a retry after an error (5)", calls)
	}
}
