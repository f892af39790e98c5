package gitsource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/dircache"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// fixture is a served repository with a few branches and tags.
type fixture struct {
	server *gitserver.Server
	repo   *gitserver.Repo
	remote Remote
	first  string // main's first commit, tagged v1.0.0 (lightweight)
	second string // main's tip, tagged v1.2.0 (annotated) and 1.10.0-rc.1
	topic  string // the tip of branch topic, tagged v2.0.0
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := gitserver.New(t)
	r := s.Repo(t, "app")
	f := &fixture{server: s, repo: r, remote: Remote{URL: r.URL(), InsecureHTTP: true}}
	f.first = r.Commit(t, "main", map[string]string{"deploy/app.yaml": "kind: ConfigMap\n"}, "first")
	f.second = r.Commit(t, "main", map[string]string{"deploy/app.yaml": "kind: Secret\n"}, "second")
	f.topic = r.Commit(t, "topic", map[string]string{"topic.yaml": "kind: Pod\n"}, "topic")
	r.Tag(t, "v1.0.0", f.first)
	r.TagAnnotated(t, "v1.2.0", f.second, "release 1.2.0")
	r.Tag(t, "1.10.0-rc.1", f.second)
	r.Tag(t, "v2.0.0", f.topic)
	r.Tag(t, "latest", f.topic)
	return f
}

// newCache returns a cache of checkouts with a directory cache of its own.
func newCache(tb testing.TB, limits Limits) *Cache {
	return newCacheIn(tb.TempDir(), limits)
}

// newCacheIn returns a cache of checkouts with a directory cache of its own under root.
func newCacheIn(root string, limits Limits) *Cache {
	return NewCache(dircache.New(root, "fill-", 32, 0), limits)
}

func TestResolveNamesTheCommitEachRefPointsAt(t *testing.T) {
	f := newFixture(t)
	c := newCache(t, Limits{})
	cases := []struct {
		name string
		ref  Ref
		want Revision
		text string
	}{
		{"default branch", Ref{}, Revision{Ref: "main", Commit: f.second}, "main@sha1:" + f.second},
		{"branch", Ref{Branch: "topic"}, Revision{Ref: "topic", Commit: f.topic}, "topic@sha1:" + f.topic},
		{"lightweight tag", Ref{Tag: "v1.0.0"}, Revision{Ref: "v1.0.0", Commit: f.first}, "v1.0.0@sha1:" + f.first},
		{"annotated tag peels to its commit", Ref{Tag: "v1.2.0"}, Revision{Ref: "v1.2.0", Commit: f.second}, "v1.2.0@sha1:" + f.second},
		{"semver picks the newest match", Ref{SemVer: ">=1.0.0 <2.0.0"}, Revision{Ref: "v1.2.0", Commit: f.second}, ""},
		{"semver without v and across majors", Ref{SemVer: "*"}, Revision{Ref: "v2.0.0", Commit: f.topic}, ""},
		{"semver prerelease only when asked", Ref{SemVer: ">=1.10.0-0 <2.0.0"}, Revision{Ref: "1.10.0-rc.1", Commit: f.second}, ""},
		{"commit names itself", Ref{Commit: strings.ToUpper(f.first)}, Revision{Commit: f.first}, "sha1:" + f.first},
		{"a full ref name", Ref{Name: "refs/heads/topic"}, Revision{Ref: "refs/heads/topic", Commit: f.topic}, "refs/heads/topic@sha1:" + f.topic},
		{"a full tag name peels", Ref{Name: "refs/tags/v1.2.0"}, Revision{Ref: "refs/tags/v1.2.0", Commit: f.second}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Resolve(context.Background(), f.remote, tc.ref)
			if err != nil {
				t.Fatalf("Resolve(%+v): %v", tc.ref, err)
			}
			if got != tc.want {
				t.Fatalf("Resolve(%+v) = %+v, want %+v", tc.ref, got, tc.want)
			}
			if tc.text != "" && got.String() != tc.text {
				t.Errorf("String() = %q, want %q", got.String(), tc.text)
			}
		})
	}
}

func TestResolveListsRefsWithoutFetching(t *testing.T) {
	f := newFixture(t)
	c := newCache(t, Limits{})
	for _, ref := range []Ref{{}, {Branch: "topic"}, {Tag: "v1.2.0"}, {SemVer: "^1"}} {
		if _, err := c.Resolve(context.Background(), f.remote, ref); err != nil {
			t.Fatalf("Resolve(%+v): %v", ref, err)
		}
	}
	if _, err := c.Resolve(context.Background(), f.remote, Ref{Commit: f.first}); err != nil {
		t.Fatalf("Resolve(commit): %v", err)
	}
	if got := f.server.Fetches("app"); got != 0 {
		t.Errorf("server saw %d upload-pack POSTs, want 0", got)
	}
	if got := f.server.Advertisements("app"); got != 5 {
		t.Errorf("server saw %d ref advertisements, want 5 (the commit's checks access)", got)
	}
	if c.Fetches() != 0 {
		t.Errorf("Fetches() = %d, want 0", c.Fetches())
	}
}

func TestResolveMissingRefIsNotFound(t *testing.T) {
	f := newFixture(t)
	c := newCache(t, Limits{})
	cases := []struct {
		ref  Ref
		want string
	}{
		{Ref{Branch: "nope"}, `branch "nope" not found in ` + f.repo.URL()},
		{Ref{Tag: "v9.9.9"}, `tag "v9.9.9" not found in ` + f.repo.URL()},
		{Ref{SemVer: ">=3.0.0"}, `no tag matching semver ">=3.0.0" in ` + f.repo.URL()},
	}
	for _, tc := range cases {
		_, err := c.Resolve(context.Background(), f.remote, tc.ref)
		var nf *RefNotFoundError
		if !errors.As(err, &nf) || !IsNotFound(err) {
			t.Fatalf("Resolve(%+v) = %v, want a *RefNotFoundError", tc.ref, err)
		}
		if err.Error() != tc.want {
			t.Errorf("Resolve(%+v) error %q, want %q", tc.ref, err, tc.want)
		}
	}

	missing := Remote{URL: f.server.URL() + "/missing.git", InsecureHTTP: true}
	if _, err := c.Resolve(context.Background(), missing, Ref{}); !IsNotFound(err) {
		t.Errorf("Resolve of a missing repository = %v, want not found", err)
	}
	f.server.Repo(t, "empty")
	empty := Remote{URL: f.server.URL() + "/empty.git", InsecureHTTP: true}
	if _, err := c.Resolve(context.Background(), empty, Ref{}); !IsNotFound(err) {
		t.Errorf("Resolve of an empty repository = %v, want not found", err)
	}
}

func TestResolveUnreachableHostIsTransient(t *testing.T) {
	c := newCache(t, Limits{})
	s := gitserver.New(t)
	url := s.URL() + "/app.git"
	s.Close()
	_, err := c.Resolve(context.Background(), Remote{URL: url, InsecureHTTP: true}, Ref{})
	if err == nil || IsNotFound(err) || IsAuthError(err) || IsInvalid(err) {
		t.Fatalf("Resolve against a closed server = %v, want a plain (transient) error", err)
	}
}

// ListRefs lists the refs matching globs whose * stops at a slash, each with its commit;
// a ref named in full checks out as the commit it names.
func TestListRefsMatchesGlobsAndANamedRefChecksOut(t *testing.T) {
	f := newFixture(t)
	c := newCache(t, Limits{})
	f.repo.SetRef(t, "refs/pull/1/head", f.topic)
	f.repo.SetRef(t, "refs/pull/2/merge", f.second)
	got, err := c.ListRefs(context.Background(), f.remote, []string{"refs/pull/*/head", "refs/heads/top*"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"refs/pull/1/head": f.topic, "refs/heads/topic": f.topic}
	if len(got) != len(want) || got["refs/pull/1/head"] != f.topic || got["refs/heads/topic"] != f.topic {
		t.Errorf("ListRefs = %v, want %v", got, want)
	}
	rev, err := c.Resolve(context.Background(), f.remote, Ref{Name: "refs/pull/1/head"})
	if err != nil {
		t.Fatal(err)
	}
	dir, release, err := c.Checkout(context.Background(), f.remote, rev)
	if err != nil {
		t.Fatalf("checkout of %s: %v", rev, err)
	}
	defer release()
	if _, err := os.Stat(filepath.Join(dir, "topic.yaml")); err != nil {
		t.Errorf("the checkout of refs/pull/1/head lacks the topic's file: %v", err)
	}
	if _, err := c.Resolve(context.Background(), f.remote, Ref{Name: "pull/1/head"}); !IsInvalid(err) {
		t.Errorf("a name that is not a full ref: %v", err)
	}
	if _, err := c.ListRefs(context.Background(), f.remote, []string{"refs/heads/[preview"}); !IsInvalid(err) {
		t.Errorf("a pattern that is not a glob: %v", err)
	}
}
