package gitsource

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/test/hostile"
)

// A remote chooses how much it answers; what the operator reads of it is bounded.
func TestAHostileRemoteCostsABoundedRead(t *testing.T) {
	const bound = 1 << 20
	for _, tc := range []struct {
		name   string
		status int
		check  func(t *testing.T, err error)
		// most is what the remote may have written: the bound, and what the
		// sockets buffer.
		most int64
	}{
		{"an endless ref advertisement", http.StatusOK, func(t *testing.T, err error) {
			var limit *LimitError
			if !errors.As(err, &limit) || limit.Bound != "response" {
				t.Fatalf("Resolve = %v, want a *LimitError on the response", err)
			}
			if !strings.Contains(err.Error(), "more than 1 MiB") {
				t.Errorf("error %q should name the bound", err)
			}
		}, bound + 16<<20},
		{"a refusal whose body never ends", http.StatusUnauthorized, func(t *testing.T, err error) {
			if !IsAuthError(err) {
				t.Fatalf("Resolve = %v, want an *AuthError", err)
			}
			if strings.Contains(err.Error(), "denied") {
				t.Errorf("error %q repeats the refusal's body", err)
			}
		}, 16 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written hostile.Counter
			srv := httptest.NewServer(hostile.GitRefs(tc.status, &written))
			t.Cleanup(srv.Close)
			c := newCache(t, Limits{MaxRefsBytes: bound})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := c.Resolve(ctx, Remote{URL: srv.URL + "/app.git", InsecureHTTP: true}, Ref{Branch: "main"})
			tc.check(t, err)
			srv.CloseClientConnections()
			if got := written.Written(); got > tc.most {
				t.Errorf("the remote wrote %d bytes before the operator stopped reading, want at most %d", got, tc.most)
			}
		})
	}
}

// A clone asks for the refs again: a remote that answered the listing before it and
// floods the clone's own advertisement costs a bounded read too, whatever MaxRepoBytes.
func TestACloneReadsItsRefAdvertisementWithinItsBound(t *testing.T) {
	f := newFixture(t)
	upstream, err := url.Parse(f.server.URL())
	if err != nil {
		t.Fatal(err)
	}
	var written hostile.Counter
	srv := httptest.NewServer(hostile.GitRefsAfter(2, httputil.NewSingleHostReverseProxy(upstream), &written))
	t.Cleanup(srv.Close)
	remote := Remote{URL: srv.URL + strings.TrimPrefix(f.remote.URL, f.server.URL()), InsecureHTTP: true}
	c := newCache(t, Limits{MaxRefsBytes: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rev, err := c.Resolve(ctx, remote, Ref{Branch: "main"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	_, _, err = c.Checkout(ctx, remote, rev)
	var limit *LimitError
	if !errors.As(err, &limit) || limit.Bound != "response" || limit.Commit != rev.Commit {
		t.Fatalf("Checkout = %v, want a *LimitError on the response of the clone", err)
	}
	srv.CloseClientConnections()
	if got, most := written.Written(), int64(1<<20+16<<20); got > most {
		t.Errorf("the remote wrote %d bytes before the clone stopped reading, want at most %d", got, most)
	}
}
