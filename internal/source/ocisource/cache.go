package ocisource

import (
	"context"
	"sync/atomic"

	"github.com/vidra-operator/vidra/internal/source/dircache"
)

// Cache pulls artifacts into directories of a directory cache it may share with other
// sources, one download per artifact however many callers want it at once; the
// directory cache's bounds decide how many are kept.
type Cache struct {
	limits Limits
	dirs   *dircache.Cache // by "oci " credentials oci://host/repository@digest
	pulls  atomic.Int64
}

// NewCache returns a cache keeping its artifacts in dirs.
func NewCache(dirs *dircache.Cache, limits Limits) *Cache {
	return &Cache{limits: limits.withDefaults(), dirs: dirs}
}

// Pulls is the number of downloads started so far.
func (c *Cache) Pulls() int64 {
	return c.pulls.Load()
}

// Pull makes the artifact rev names available as a directory of its files. The directory
// stays until release is called (once is enough; more calls do nothing) and the cache
// needs the room; it must not be modified. Callers that ask for an artifact being
// downloaded wait for that download rather than start their own, and later callers reuse
// its directory without asking the registry again.
func (c *Cache) Pull(ctx context.Context, src Remote, rev Revision) (dir string, release func(), err error) {
	if err := validateDigest(rev.Digest); err != nil {
		return "", nil, err
	}
	t, err := newTarget(src)
	if err != nil {
		return "", nil, err
	}
	defer t.close()
	// The "oci " prefix keeps the keys apart from other sources' in a shared cache; the
	// credentials' fingerprint keeps a caller the registry would refuse from reading what
	// another pulled.
	return c.dirs.Get(ctx, "oci "+src.Fingerprint()+" "+t.url+"@"+rev.Digest, func(ctx context.Context, dir string) error {
		c.pulls.Add(1)
		return c.download(ctx, t, rev.Digest, dir)
	})
}
