package gitsource

import (
	"context"
	"sync/atomic"

	"github.com/vidra-operator/vidra/internal/source/dircache"
)

// Limits bound one checkout on disk (worktree and .git), and what a remote
// may send; 0 is unbounded, but for MaxRefsBytes.
type Limits struct {
	MaxRepoBytes int64
	MaxFiles     int
	// MaxRefsBytes bounds each ref advertisement as the remote sends it over
	// HTTP (default 32 MiB), a clone's included; the clone's pack is bounded
	// by MaxRepoBytes (it is no larger than the checkout's .git).
	MaxRefsBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxRefsBytes <= 0 {
		l.MaxRefsBytes = defaultMaxRefsBytes
	}
	return l
}

// Cache keeps checkouts of resolved revisions in a directory cache it may
// share with other sources, whose bounds decide how many are kept.
// Each (URL, commit, credentials) is fetched once: concurrent callers wait
// for the one clone, later callers reuse its directory.
type Cache struct {
	limits  Limits
	dirs    *dircache.Cache // by "git " commit credentials URL
	fetches atomic.Int64
}

// NewCache returns a cache keeping its checkouts in dirs.
func NewCache(dirs *dircache.Cache, limits Limits) *Cache {
	installBoundedTransport()
	return &Cache{limits: limits.withDefaults(), dirs: dirs}
}

// Fetches counts the checkouts started since the cache was made, each one
// clone unless it failed before cloning (a moved branch, say).
func (c *Cache) Fetches() int64 { return c.fetches.Load() }

// Checkout returns a directory holding the worktree at exactly rev.Commit,
// and a release func to call once the directory is no longer read; the
// directory may be deleted after that. A branch or tag that has moved since
// rev was resolved gives a *MovedError, never another tree.
func (c *Cache) Checkout(ctx context.Context, remote Remote, rev Revision) (string, func(), error) {
	dir, release, err := c.checkout(ctx, remote, rev)
	return dir, release, scrub(err, remote.Auth)
}

func (c *Cache) checkout(ctx context.Context, remote Remote, rev Revision) (string, func(), error) {
	e, err := parseRemote(remote)
	if err != nil {
		return "", nil, err
	}
	commit, err := parseCommit(rev.Commit)
	if err != nil {
		return "", nil, err
	}
	rev.Commit = commit
	// The commit and the credentials' fingerprint are fixed-length hex, so
	// whatever the URL holds, two different triples never make one key; the
	// "git " prefix keeps them apart from other sources' keys in a shared cache.
	key := "git " + commit + " " + e.remote.Fingerprint() + " " + e.remote.URL
	return c.dirs.Get(ctx, key, func(ctx context.Context, dir string) error {
		c.fetches.Add(1)
		return c.clone(ctx, e, rev, dir)
	})
}
