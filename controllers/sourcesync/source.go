package sourcesync

import (
	"context"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
)

// Object is a sync of a source: a GitSync, an OCISync or a HelmSync.
type Object interface {
	syncs.Object
	// Options are its spec beside the source: destination, interval, rollout, template.
	Options() *vidrav1alpha1.SyncOptions
	// SourceStatus is its status.
	SourceStatus() *vidrav1alpha1.SourceSyncStatus
}

// Resolver asks a sync's source which revision the sync names now.
type Resolver interface {
	// Resolve asks the source which revision obj names now, without downloading it.
	Resolve(ctx context.Context, obj Object) (Revision, error)
}

// Source is what differs from one kind of sync to another: how it learns the revision
// its source names and how it gets the bundle of a revision, the same for every
// destination (a Renderer builds one for each).
type Source interface {
	Resolver
	// Bundle fetches the revision, once however many syncs read it, and builds obj's
	// bundle from it: one multi-document YAML stream.
	Bundle(ctx context.Context, obj Object, rev Revision) ([]byte, error)
}

// Revision is what a sync's source names at one time.
type Revision struct {
	// Name is for people: main@sha1:<commit>, v1.2.0@sha256:<digest>.
	Name string
	// Key identifies what is built: the URL, the exact revision and the path. Syncs with
	// equal keys and Credentials deliver the same bundle, and a pair seen before is never
	// fetched again.
	Key string
	// Credentials fingerprints how the sync reaches its source (its Secret, its CA): a
	// bundle built with one is not handed to a sync with another, or with none, which
	// the source might refuse. Kept in memory, never in status.
	Credentials string
	// Digest is the source's digest of what it names, when it has one before any bundle is
	// built (a chart archive's); status.source.digest shows it.
	Digest string
	// Fetch is the source's own handle on the revision, for Bundle or Prepare.
	Fetch any
}

// bounded is ctx bounded by a source's timeout (none when 0).
func bounded(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return context.WithCancel(ctx)
}
