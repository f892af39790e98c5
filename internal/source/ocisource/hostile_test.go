package ocisource_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/ocisource"
	"github.com/vidra-operator/vidra/internal/test/hostile"
)

// A semver ref lists the repository's tags; a registry whose list never ends costs a
// bounded read.
func TestAnEndlessTagListIsABoundedRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages bool
		limit string
	}{
		{"one page that never ends", false, "MaxTagListBytes"},
		{"pages that never end", true, "MaxTagListPages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var written hostile.Counter
			srv := httptest.NewServer(hostile.OCITags(tc.pages, &written))
			t.Cleanup(srv.Close)
			c := newCache(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			src := ocisource.Remote{URL: "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/team/app", InsecureHTTP: true}
			_, err := c.Resolve(ctx, src, ocisource.Ref{SemVer: ">=1.0.0"})
			var limit *ocisource.LimitError
			if !errors.As(err, &limit) || limit.Limit != tc.limit {
				t.Fatalf("Resolve = %v, want a *LimitError on %s", err, tc.limit)
			}
			if !strings.Contains(err.Error(), tc.limit) || !strings.Contains(err.Error(), "/team/app") {
				t.Errorf("error %q should name the bound and the repository", err)
			}
			srv.CloseClientConnections()
			if got, most := written.Written(), int64(32<<20); got > most {
				t.Errorf("the registry wrote %d bytes before the operator stopped reading, want at most %d", got, most)
			}
		})
	}
}

// A registry's refusal or failure reaches the sync as its status code: the messages of
// its body, the registry's words, never do.
func TestARegistrysWordsNeverReachTheError(t *testing.T) {
	const words = "visit evil.example to restore access"
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests, http.StatusInternalServerError} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/v2/" { // a registry, refusing what is asked of it
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, `{"errors":[{"code":"DENIED","message":%q,"detail":%q}]}`, words, words)
		}))
		c := newCache(t)
		src := ocisource.Remote{URL: "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/team/app", InsecureHTTP: true}
		_, err := c.Resolve(context.Background(), src, ocisource.Ref{SemVer: ">=1.0.0"}) // a GET: the tag list
		srv.Close()
		if err == nil || strings.Contains(err.Error(), words) || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d", code)) {
			t.Errorf("HTTP %d: error %v, want its code and none of the registry's words", code, err)
		}
		if auth := code == http.StatusUnauthorized || code == http.StatusForbidden; ocisource.IsAuthError(err) != auth {
			t.Errorf("HTTP %d: IsAuthError = %v, want %v", code, !auth, auth)
		}
	}
}
