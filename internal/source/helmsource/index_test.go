package helmsource_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

func TestAnUnchangedIndexCostsA304(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"})
	clk := newClock()
	c := newClient(t, clk)
	s := src(repo, helmrepo.CapsChart, "")

	for range 3 {
		if _, err := c.Resolve(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	if repo.IndexGets() != 1 {
		t.Fatalf("index asked %d times within IndexMaxAge, want 1", repo.IndexGets())
	}
	clk.advance(6 * time.Second)
	if _, err := c.Resolve(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if repo.IndexGets() != 2 || repo.IndexBodies() != 1 || c.IndexFetches() != 1 {
		t.Fatalf("after IndexMaxAge: gets %d, bodies %d, client fetches %d; want 2, 1 (a 304), 1",
			repo.IndexGets(), repo.IndexBodies(), c.IndexFetches())
	}

	repo.Add(helmrepo.Chart(t, helmrepo.CapsChart, "1.1.0"))
	clk.advance(6 * time.Second)
	v, err := c.Resolve(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if v.Version != "1.1.0" || repo.IndexBodies() != 2 {
		t.Fatalf("after a change: version %s, bodies %d; want 1.1.0, 2", v.Version, repo.IndexBodies())
	}
}

func TestLastModifiedAloneMakesA304(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"}, helmrepo.WithoutETag())
	clk := newClock()
	c := newClient(t, clk)
	for range 2 {
		if _, err := c.Resolve(t.Context(), src(repo, helmrepo.CapsChart, "")); err != nil {
			t.Fatal(err)
		}
		clk.advance(time.Minute)
	}
	if repo.IndexGets() != 2 || repo.IndexBodies() != 1 {
		t.Fatalf("gets %d, bodies %d; want 2, 1", repo.IndexGets(), repo.IndexBodies())
	}
}

func TestConcurrentResolvesOfOneRepositoryMakeOneRequest(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"})
	c := newClient(t, newClock())
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := c.Resolve(t.Context(), src(repo, helmrepo.CapsChart, "")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if repo.IndexGets() != 1 {
		t.Fatalf("index asked %d times, want 1", repo.IndexGets())
	}
}

func TestDifferentCredentialsNeverShareAnIndex(t *testing.T) {
	repo := repoWith(t, helmrepo.CapsChart, []string{"1.0.0"}, helmrepo.WithBasicAuth("alice", "right"))
	c := newClient(t, newClock())
	good := src(repo, helmrepo.CapsChart, "")
	good.Username, good.Password = "alice", "right"
	if _, err := c.Resolve(t.Context(), good); err != nil {
		t.Fatal(err)
	}
	bad := good
	bad.Password = "wrong-secret"
	_, err := c.Resolve(t.Context(), bad)
	if !helmsource.IsAuthError(err) {
		t.Fatalf("Resolve with a wrong password = %v, want an auth error", err)
	}
	if strings.Contains(err.Error(), "wrong-secret") || strings.Contains(err.Error(), "right") {
		t.Fatalf("error %q shows a credential", err)
	}
}

func TestAnIndexOverTheBoundIsNotReadPastIt(t *testing.T) {
	const bound = 64 << 10
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No Content-Length: the client cannot know the size before it reads.
		chunk := []byte(strings.Repeat("# padding\n", 1000))
		_, _ = w.Write([]byte("apiVersion: v1\n"))
		for {
			n, err := w.Write(chunk)
			served.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if served.Load() > 64<<20 {
				return
			}
		}
	}))
	defer srv.Close()
	c := helmsource.New(helmsource.Options{Limits: helmsource.Limits{MaxIndexBytes: bound}})
	_, err := c.Resolve(t.Context(), helmsource.Source{RepoURL: srv.URL + "/charts", Chart: "x", InsecureHTTP: true})
	requireErrorAs[*helmsource.LimitError](t, err, srv.URL+"/charts/index.yaml", "MaxIndexBytes")
	if limit := (*helmsource.LimitError)(nil); errors.As(err, &limit) && limit.Max != bound {
		t.Errorf("bound %d, want %d", limit.Max, bound)
	}
	srv.CloseClientConnections()
	// The server may have written ahead into socket buffers, never the whole body.
	if got := served.Load(); got > 16<<20 {
		t.Fatalf("server wrote %d bytes: the body was read far past the bound", got)
	}
}

func TestAnIndexThatSaysItIsOverTheBoundIsNotRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		_, _ = io.WriteString(w, "apiVersion: v1\n")
	}))
	defer srv.Close()
	c := helmsource.New(helmsource.Options{Limits: helmsource.Limits{MaxIndexBytes: 1000}})
	_, err := c.Resolve(t.Context(), helmsource.Source{RepoURL: srv.URL, Chart: "x", InsecureHTTP: true})
	requireErrorAs[*helmsource.LimitError](t, err, "MaxIndexBytes")
}

func TestSourcesThatCannotWorkAreInvalid(t *testing.T) {
	c := newClient(t, newClock())
	for name, tc := range map[string]struct {
		src  helmsource.Source
		says string
	}{
		"http without InsecureHTTP": {helmsource.Source{RepoURL: "http://charts.example", Chart: "a"}, "insecureAllowHTTP"},
		"credentials in the URL":    {helmsource.Source{RepoURL: "https://bob:hunter2@charts.example", Chart: "a"}, "must not hold credentials"},
		"unknown scheme":            {helmsource.Source{RepoURL: "ftp://charts.example", Chart: "a"}, "not supported"},
		"no chart":                  {helmsource.Source{RepoURL: "https://charts.example"}, "chart name"},
		"bad range":                 {helmsource.Source{RepoURL: "oci://charts.example/x", Chart: "a", Version: "not a version"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Resolve(t.Context(), tc.src)
			requireErrorAs[*helmsource.InvalidError](t, err, tc.says)
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q shows the password", err)
			}
		})
	}
}

func TestNotAnIndexIsInvalidAndNoIndexIsNotFound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/garbage/") {
			_, _ = io.WriteString(w, "<html>not yaml: [")
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c := newClient(t, newClock())
	_, err := c.Resolve(t.Context(), helmsource.Source{RepoURL: srv.URL + "/garbage", Chart: "x", InsecureHTTP: true})
	requireErrorAs[*helmsource.InvalidError](t, err, "not a Helm repository index")
	_, err = c.Resolve(t.Context(), helmsource.Source{RepoURL: srv.URL + "/none", Chart: "x", InsecureHTTP: true})
	requireErrorAs[*helmsource.NotFoundError](t, err, "index.yaml not found")
}
