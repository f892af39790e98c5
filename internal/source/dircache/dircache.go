// Package dircache keeps directories that are costly to fill (a clone, an extracted
// artifact): one fill per key however many callers want it at once, the most recently
// used kept on disk up to a count and a total size, the others deleted once nobody holds
// them.
package dircache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultMaxEntries is a count of directories to keep when nothing else bounds it.
const DefaultMaxEntries = 64

// Cache fills and keeps directories under a root of its own, one per key.
type Cache struct {
	root       string
	prefix     string
	maxEntries int
	maxBytes   int64 // 0: unbounded

	fills atomic.Int64

	prepareMu sync.Mutex
	prepared  bool

	mu      sync.Mutex
	entries map[string]*entry // filling or ready
	lru     *list.List        // of ready *entry, most recently used first
	bytes   int64             // the sizes of the ready entries
}

// entry is one key's directory, being filled until done is closed.
type entry struct {
	key   string
	holds int // callers holding or waiting for the directory
	done  chan struct{}
	dir   string        // set before done is closed, when err is nil
	size  int64         // dir's regular files in bytes, set with dir
	err   error         // set before done is closed
	elem  *list.Element // in lru once ready
}

// New returns a cache keeping at most maxEntries directories, and at most maxBytes of
// regular files in them (0: unbounded), under root; directories callers hold are kept
// even beyond both bounds. root belongs to this cache alone: before the first fill it
// is created and the directories named prefix* an earlier process left there are
// deleted, since nothing else would.
func New(root, prefix string, maxEntries int, maxBytes int64) *Cache {
	return &Cache{root: root, prefix: prefix, maxEntries: maxEntries, maxBytes: maxBytes, entries: map[string]*entry{}, lru: list.New()}
}

// Fills counts the fills started since the cache was made, failed ones included.
func (c *Cache) Fills() int64 { return c.fills.Load() }

// Bytes is the size of the regular files in the directories kept.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Get returns key's directory, calling fill to fill it unless it is ready or another
// caller is filling it, in which case Get waits. fill gets a new, empty, existing
// directory under root named prefix*; when it fails, the directory is deleted, its
// error is returned as is, and the next Get of key fills again. A caller whose own
// ctx ends while it waits gets ctx's error; a waiter whose filler's ctx ended instead
// fills in its place. The directory stays until release is called (more calls do
// nothing) and the cache needs the room; it must not be modified.
func (c *Cache) Get(ctx context.Context, key string, fill func(ctx context.Context, dir string) error) (dir string, release func(), err error) {
	for {
		e, leader := c.acquire(key)
		if leader {
			c.fills.Add(1)
			dir, size, err := c.fill(ctx, fill)
			c.finish(e, dir, size, err)
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			c.release(e)
			return "", nil, fmt.Errorf("wait for the directory to be filled: %w", ctx.Err())
		}
		if e.err == nil {
			var once sync.Once
			return e.dir, func() { once.Do(func() { c.release(e) }) }, nil
		}
		c.release(e)
		// A fill its own caller gave up on says nothing about this caller's: try again.
		if !leader && isContextError(e.err) && ctx.Err() == nil {
			continue
		}
		return "", nil, e.err
	}
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// acquire holds key's entry, making it when there is none; leader says the caller
// must fill it.
func (c *Cache) acquire(key string) (e *entry, leader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		e.holds++
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
		}
		return e, false
	}
	e = &entry{key: key, holds: 1, done: make(chan struct{})}
	c.entries[key] = e
	return e, true
}

// fill runs fn in a new directory and measures it, deleting it again if either fails.
func (c *Cache) fill(ctx context.Context, fn func(ctx context.Context, dir string) error) (string, int64, error) {
	if err := c.prepare(); err != nil {
		return "", 0, err
	}
	dir, err := os.MkdirTemp(c.root, c.prefix)
	if err != nil {
		return "", 0, fmt.Errorf("make a directory in %s: %w", c.root, err)
	}
	err = fn(ctx, dir)
	var size int64
	if err == nil {
		size, err = sizeOf(dir)
	}
	if err != nil {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove the failed fill's directory: %w", rmErr))
		}
		return "", 0, err
	}
	return dir, size, nil
}

// sizeOf sums the sizes of the regular files under dir, following no symlink.
func sizeOf(dir string) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure the filled directory: %w", err)
	}
	return size, nil
}

// finish records how e's fill ended and wakes its waiters. A failed entry leaves the
// map, so the next caller tries again.
func (c *Cache) finish(e *entry, dir string, size int64, err error) {
	c.mu.Lock()
	if err != nil {
		e.err = err
		delete(c.entries, e.key)
	} else {
		e.dir, e.size = dir, size
		e.elem = c.lru.PushFront(e)
		c.bytes += size
	}
	stale := c.evictLocked()
	close(e.done)
	c.mu.Unlock()
	removeAll(stale)
}

// release drops one hold on e and trims the cache.
func (c *Cache) release(e *entry) {
	c.mu.Lock()
	e.holds--
	stale := c.evictLocked()
	c.mu.Unlock()
	removeAll(stale)
}

// evictLocked drops the least recently used ready entries nobody holds while there are
// more than maxEntries or their sizes add up to more than maxBytes, and returns their
// directories to delete outside the lock (a new fill of the same key gets a directory of
// its own, so it cannot collide).
func (c *Cache) evictLocked() []string {
	var stale []string
	for el := c.lru.Back(); el != nil && c.overLocked(); {
		prev := el.Prev()
		if e := el.Value.(*entry); e.holds == 0 {
			c.lru.Remove(el)
			delete(c.entries, e.key)
			c.bytes -= e.size
			stale = append(stale, e.dir)
		}
		el = prev
	}
	return stale
}

// overLocked says whether the cache holds more than its bounds allow.
func (c *Cache) overLocked() bool {
	return len(c.entries) > c.maxEntries || (c.maxBytes > 0 && c.bytes > c.maxBytes)
}

func removeAll(dirs []string) {
	for _, d := range dirs {
		// Nothing to report to: a directory left behind is deleted on the next start.
		_ = os.RemoveAll(d)
	}
}

// prepare makes the root and deletes what an earlier process left in it (in no map,
// nothing would evict it), before the first fill; a failure is tried again by the next.
func (c *Cache) prepare() error {
	c.prepareMu.Lock()
	defer c.prepareMu.Unlock()
	if c.prepared {
		return nil
	}
	if err := os.MkdirAll(c.root, 0o750); err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	des, err := os.ReadDir(c.root)
	if err != nil {
		return fmt.Errorf("read cache directory: %w", err)
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), c.prefix) {
			if err := os.RemoveAll(filepath.Join(c.root, de.Name())); err != nil {
				return fmt.Errorf("delete a directory left by an earlier process: %w", err)
			}
		}
	}
	c.prepared = true
	return nil
}
