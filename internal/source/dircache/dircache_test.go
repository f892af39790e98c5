package dircache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const prefix = "fill-"

// writeKey is a trivial fill: it leaves the key in the directory.
func writeKey(key string) func(context.Context, string) error {
	return func(_ context.Context, dir string) error {
		return os.WriteFile(filepath.Join(dir, "key"), []byte(key), 0o600)
	}
}

func get(t *testing.T, c *Cache, key string) (string, func()) {
	t.Helper()
	dir, release, err := c.Get(t.Context(), key, writeKey(key))
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "key")); err != nil || string(b) != key {
		t.Fatalf("Get(%s): %s holds %q, %v", key, dir, b, err)
	}
	return dir, release
}

func requireDir(t *testing.T, dir string, exists bool) {
	t.Helper()
	_, err := os.Stat(dir)
	if exists && err != nil {
		t.Errorf("%s: %v", dir, err)
	}
	if !exists && !os.IsNotExist(err) {
		t.Errorf("%s still exists (err %v)", dir, err)
	}
}

func requireEmpty(t *testing.T, root string) {
	t.Helper()
	des, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		t.Errorf("left behind: %s", de.Name())
	}
}

func TestConcurrentGetsShareOneFill(t *testing.T) {
	root := t.TempDir()
	c := New(root, prefix, 32, 0)
	var wg sync.WaitGroup
	fill := func(ctx context.Context, dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 0 || !strings.HasPrefix(filepath.Base(dir), prefix) || filepath.Dir(dir) != root {
			t.Errorf("fill got %s (%d entries, %v), want a new empty %s* under the root", dir, len(entries), err, prefix)
		}
		time.Sleep(20 * time.Millisecond) // long enough for the others to queue
		return writeKey("k")(ctx, dir)
	}

	const callers = 50
	dirs := make([]string, callers)
	errs := make([]error, callers)
	releases := make([]func(), callers)
	for i := range callers {
		wg.Go(func() {
			dirs[i], releases[i], errs[i] = c.Get(t.Context(), "k", fill)
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
	if c.Fills() != 1 {
		t.Errorf("Fills() = %d, want 1", c.Fills())
	}

	// A later caller reuses the directory.
	dir, release := get(t, c, "k")
	release()
	release() // a second call does nothing
	if dir != dirs[0] || c.Fills() != 1 {
		t.Errorf("a later Get filled again: dir %s, Fills() = %d", dir, c.Fills())
	}
}

func TestEvictionSparesDirectoriesInUse(t *testing.T) {
	c := New(t.TempDir(), prefix, 2, 0)
	dirA, releaseA := get(t, c, "a") // held throughout
	dirB, releaseB := get(t, c, "b")
	releaseB()
	dirC, releaseC := get(t, c, "c")
	releaseC()
	// Three entries, room for two: a is the oldest but held, so b goes.
	requireDir(t, dirA, true)
	requireDir(t, dirB, false)
	requireDir(t, dirC, true)

	releaseA()
	releaseA() // a second call does nothing
	_, releaseB = get(t, c, "b")
	releaseB()
	if c.Fills() != 4 {
		t.Errorf("Fills() = %d, want 4 (b filled again)", c.Fills())
	}
	requireDir(t, dirA, false)
	requireDir(t, dirC, true)
}

func TestAFailedFillLeavesNothingAndIsTriedAgain(t *testing.T) {
	root := t.TempDir()
	c := New(root, prefix, 32, 0)
	broken := errors.New("broken")
	_, _, err := c.Get(t.Context(), "k", func(_ context.Context, dir string) error {
		_ = os.WriteFile(filepath.Join(dir, "half"), nil, 0o600)
		return broken
	})
	if !errors.Is(err, broken) {
		t.Fatalf("Get = %v, want the fill's error", err)
	}
	requireEmpty(t, root)

	_, release := get(t, c, "k")
	release()
	if c.Fills() != 2 {
		t.Errorf("Fills() = %d, want 2", c.Fills())
	}
}

func TestAFirstFillDeletesWhatAnEarlierProcessLeft(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cache")
	stale := filepath.Join(root, prefix+"stale")
	other := filepath.Join(root, "not-ours")
	for _, d := range []string{stale, other} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	c := New(root, prefix, 32, 0)
	requireDir(t, stale, true) // nothing is deleted before the first fill

	_, release := get(t, c, "k")
	release()
	requireDir(t, stale, false)
	requireDir(t, other, true)
}

func TestTheRootIsMadeOnTheFirstFill(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "b")
	c := New(root, prefix, 32, 0)
	requireDir(t, root, false)
	_, release := get(t, c, "k")
	release()
	requireDir(t, root, true)
}

func TestAWaiterStopsWaitingWhenItsContextEnds(t *testing.T) {
	c := New(t.TempDir(), prefix, 32, 0)
	started, finish := make(chan struct{}), make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		_, release, err := c.Get(t.Context(), "k", func(ctx context.Context, dir string) error {
			close(started)
			<-finish
			return writeKey("k")(ctx, dir)
		})
		if err == nil {
			release()
		}
		leaderDone <- err
	}()
	<-started

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := c.Get(ctx, "k", writeKey("k")); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended = %v, want its context's error", err)
	}
	close(finish)
	if err := <-leaderDone; err != nil {
		t.Errorf("the leader: %v", err)
	}
	if c.Fills() != 1 {
		t.Errorf("Fills() = %d, want 1", c.Fills())
	}
}

func TestAWaiterFillsInPlaceOfACancelledLeader(t *testing.T) {
	c := New(t.TempDir(), prefix, 32, 0)
	leaderCtx, cancelLeader := context.WithCancel(t.Context())
	started := make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		_, _, err := c.Get(leaderCtx, "k", func(ctx context.Context, _ string) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
		leaderDone <- err
	}()
	<-started

	type result struct {
		dir     string
		release func()
		err     error
	}
	waiter := make(chan result, 1)
	go func() {
		dir, release, err := c.Get(t.Context(), "k", writeKey("k"))
		waiter <- result{dir, release, err}
	}()
	waitForHolds(t, c, "k", 2) // the waiter is queued behind the leader
	cancelLeader()

	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled leader = %v, want its context's error", err)
	}
	r := <-waiter
	if r.err != nil {
		t.Fatalf("the waiter = %v, want it to fill in the leader's place", r.err)
	}
	defer r.release()
	if b, err := os.ReadFile(filepath.Join(r.dir, "key")); err != nil || string(b) != "k" {
		t.Errorf("the waiter's directory holds %q, %v", b, err)
	}
	if c.Fills() != 2 {
		t.Errorf("Fills() = %d, want 2", c.Fills())
	}
}

func waitForHolds(t *testing.T, c *Cache, key string, holds int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		e := c.entries[key]
		n := 0
		if e != nil {
			n = e.holds
		}
		c.mu.Unlock()
		if n == holds {
			return
		}
	}
	t.Fatalf("%s never had %d holds", key, holds)
}
