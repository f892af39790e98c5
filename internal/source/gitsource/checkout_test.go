package gitsource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func TestConcurrentCheckoutsShareOneFetch(t *testing.T) {
	f := newFixture(t)
	c := newCache(t, Limits{})
	rev, err := c.Resolve(context.Background(), f.remote, Ref{Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}

	const callers = 50
	dirs := make([]string, callers)
	errs := make([]error, callers)
	releases := make([]func(), callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			dirs[i], releases[i], errs[i] = c.Checkout(context.Background(), f.remote, rev)
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Fatalf("caller %d got %s, caller 0 got %s", i, dirs[i], dirs[0])
		}
		releases[i]()
	}
	if got := readFile(t, dirs[0], "deploy/app.yaml"); got != "kind: Secret\n" {
		t.Errorf("deploy/app.yaml = %q, want main's tip", got)
	}
	if c.Fetches() != 1 || f.server.Fetches("app") != 1 {
		t.Errorf("Fetches() = %d, server POSTs = %d; want 1 and 1", c.Fetches(), f.server.Fetches("app"))
	}
	if _, err := os.Stat(filepath.Join(dirs[0], ".git", "shallow")); err != nil {
		t.Errorf("a branch tip should be cloned shallow: %v", err)
	}

	// A later caller reuses the directory.
	dir, release, err := c.Checkout(context.Background(), f.remote, rev)
	if err != nil || dir != dirs[0] {
		t.Fatalf("later Checkout = %s, %v; want %s", dir, err, dirs[0])
	}
	release()
	if c.Fetches() != 1 {
		t.Errorf("Fetches() = %d after a cache hit, want 1", c.Fetches())
	}
}

func TestNewCommitIsFetchedAgain(t *testing.T) {
	f := newFixture(t)
	c := newCache(t, Limits{})
	ctx := context.Background()
	checkoutMain := func() string {
		t.Helper()
		rev, err := c.Resolve(ctx, f.remote, Ref{})
		if err != nil {
			t.Fatal(err)
		}
		dir, release, err := c.Checkout(ctx, f.remote, rev)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		return dir
	}
	before := checkoutMain()
	f.repo.Commit(t, "main", map[string]string{"deploy/app.yaml": "kind: Service\n"}, "third")
	after := checkoutMain()
	if before == after {
		t.Fatal("a new commit reused the old checkout")
	}
	if got := readFile(t, after, "deploy/app.yaml"); got != "kind: Service\n" {
		t.Errorf("deploy/app.yaml = %q, want the new commit's", got)
	}
	if c.Fetches() != 2 || f.server.Fetches("app") != 2 {
		t.Errorf("Fetches() = %d, server POSTs = %d; want 2 and 2", c.Fetches(), f.server.Fetches("app"))
	}
}

func TestCheckoutOfTagsAndOldCommits(t *testing.T) {
	f := newFixture(t)
	c := newCache(t, Limits{})
	ctx := context.Background()
	for _, tc := range []struct {
		rev  Revision
		file string
		want string
	}{
		{Revision{Ref: "v1.2.0", Commit: f.second}, "deploy/app.yaml", "kind: Secret\n"},
		{Revision{Ref: "v1.0.0", Commit: f.first}, "deploy/app.yaml", "kind: ConfigMap\n"},
		{Revision{Commit: f.first}, "deploy/app.yaml", "kind: ConfigMap\n"},
		{Revision{Commit: f.topic}, "topic.yaml", "kind: Pod\n"},
	} {
		dir, release, err := c.Checkout(ctx, f.remote, tc.rev)
		if err != nil {
			t.Fatalf("Checkout(%s): %v", tc.rev, err)
		}
		if got := readFile(t, dir, tc.file); got != tc.want {
			t.Errorf("Checkout(%s): %s = %q, want %q", tc.rev, tc.file, got, tc.want)
		}
		release()
	}

	unknown := Revision{Commit: "0123456789abcdef0123456789abcdef01234567"}
	if _, _, err := c.Checkout(ctx, f.remote, unknown); !IsNotFound(err) {
		t.Errorf("Checkout of an unknown commit = %v, want not found", err)
	}
}

func TestCheckoutOfAMovedBranchSaysSo(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	c := newCacheIn(root, Limits{})
	ctx := context.Background()
	stale, err := c.Resolve(ctx, f.remote, Ref{Branch: "topic"})
	if err != nil {
		t.Fatal(err)
	}
	moved := f.repo.Commit(t, "topic", map[string]string{"topic.yaml": "kind: Job\n"}, "move")

	_, _, err = c.Checkout(ctx, f.remote, stale)
	var m *MovedError
	if !errors.As(err, &m) || m.Now != moved || m.Want != f.topic {
		t.Fatalf("Checkout of a moved branch = %v, want a *MovedError to %s", err, moved)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("a failed checkout left %d entries in the cache dir", len(entries))
	}
}

// A pull request from a fork has its commit on no branch of the repository: only
// refs/pull/N/head reaches it. Its checkout fetches that ref.
func TestCheckoutOfAPullRequestFromAFork(t *testing.T) {
	f := newFixture(t)
	c := newCache(t, Limits{})
	fork := f.repo.Commit(t, "fork", map[string]string{"fork.yaml": "kind: Job\n"}, "from a fork")
	f.repo.SetRef(t, "refs/pull/3/head", fork)
	f.repo.SetRef(t, "refs/heads/fork", "")

	rev, err := c.Resolve(context.Background(), f.remote, Ref{Name: "refs/pull/3/head"})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Commit != fork {
		t.Fatalf("refs/pull/3/head resolved to %s, want %s", rev.Commit, fork)
	}
	dir, release, err := c.Checkout(context.Background(), f.remote, rev)
	if err != nil {
		t.Fatalf("checkout of %s: %v", rev, err)
	}
	defer release()
	if got := readFile(t, dir, "fork.yaml"); got != "kind: Job\n" {
		t.Errorf("fork.yaml = %q", got)
	}

	fresh := newCache(t, Limits{})
	if _, _, err := fresh.Checkout(context.Background(), f.remote, Revision{Ref: "refs/pull/4/head", Commit: fork}); !IsNotFound(err) {
		t.Errorf("checkout of a ref the remote does not have = %v, want not found", err)
	}
}
