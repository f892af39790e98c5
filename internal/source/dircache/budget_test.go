package dircache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeBytes fills a directory with n bytes of regular files, half of them in a
// subdirectory.
func writeBytes(n int) func(context.Context, string) error {
	return func(_ context.Context, dir string) error {
		if err := os.WriteFile(filepath.Join(dir, "top"), []byte(strings.Repeat("x", n/2)), 0o600); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o750); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "sub", "rest"), []byte(strings.Repeat("x", n-n/2)), 0o600)
	}
}

func getSized(t *testing.T, c *Cache, key string, n int) (string, func()) {
	t.Helper()
	dir, release, err := c.Get(t.Context(), key, writeBytes(n))
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return dir, release
}

func requireBytes(t *testing.T, c *Cache, want int64) {
	t.Helper()
	if got := c.Bytes(); got != want {
		t.Errorf("Bytes() = %d, want %d", got, want)
	}
}

func TestABudgetOfBytesEvictsTheOldestUnheld(t *testing.T) {
	c := New(t.TempDir(), prefix, 32, 250)
	dirA, release := getSized(t, c, "a", 100)
	release()
	dirB, release := getSized(t, c, "b", 100)
	release()
	requireBytes(t, c, 200)

	// c brings the total to 300, over 250: a, the least recently used, goes.
	dirC, release := getSized(t, c, "c", 100)
	release()
	requireBytes(t, c, 200)
	requireDir(t, dirA, false)
	requireDir(t, dirB, true)
	requireDir(t, dirC, true)

	// Using b again makes c the oldest.
	_, release = getSized(t, c, "b", 100)
	release()
	_, release = getSized(t, c, "d", 100)
	release()
	requireDir(t, dirB, true)
	requireDir(t, dirC, false)
	requireBytes(t, c, 200)
	if c.Fills() != 4 {
		t.Errorf("Fills() = %d, want 4", c.Fills())
	}
}

func TestABudgetOfBytesSparesDirectoriesInUse(t *testing.T) {
	c := New(t.TempDir(), prefix, 32, 150)
	dirA, releaseA := getSized(t, c, "a", 100)
	dirB, releaseB := getSized(t, c, "b", 100)
	dirC, releaseC := getSized(t, c, "c", 100)
	// All three are held: the cache goes over its budget rather than delete them.
	requireBytes(t, c, 300)

	releaseB()
	requireDir(t, dirB, false)
	requireBytes(t, c, 200)
	releaseC()
	requireDir(t, dirC, false) // a is older, but still held
	requireBytes(t, c, 100)
	releaseA()
	requireDir(t, dirA, true) // within the budget again
	requireBytes(t, c, 100)
}

func TestADirectoryOverTheBudgetGoesOnceReleased(t *testing.T) {
	root := t.TempDir()
	c := New(root, prefix, 32, 150)
	dir, release := getSized(t, c, "big", 200)
	requireDir(t, dir, true)
	requireBytes(t, c, 200)
	release()
	requireBytes(t, c, 0)
	requireEmpty(t, root)
}

func TestSizesCountRegularFilesAndFollowNoSymlink(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "large")
	if err := os.WriteFile(outside, []byte(strings.Repeat("x", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	c := New(t.TempDir(), prefix, 32, 0)
	_, release, err := c.Get(t.Context(), "k", func(ctx context.Context, dir string) error {
		if err := writeBytes(10)(ctx, dir); err != nil {
			return err
		}
		if err := os.Symlink(outside, filepath.Join(dir, "file-link")); err != nil {
			return err
		}
		return os.Symlink(filepath.Dir(outside), filepath.Join(dir, "dir-link"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	requireBytes(t, c, 10)
}
