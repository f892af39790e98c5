// Package history keeps the delivered revisions of a VidraResource as ControllerRevisions,
// the Kubernetes convention kubectl rollout history follows: one per distinct content,
// numbered in the order they were delivered, in the operator's namespace, owned by the
// VidraResource. A revision holds the digest of its content, which the content store keeps
// (in Secrets, which Kubernetes' view role does not read, as it reads ControllerRevisions);
// revisions recorded before hold their manifest compressed until Migrate moves it.
package history

import (
	"context"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Body is a revision's content: a manifest, or the digest of content in the store.
type Body struct {
	Manifest string
	Content  *vidrav1alpha1.ContentReference
}

// Revision is one delivered revision of a VidraResource.
type Revision struct {
	// Name of the ControllerRevision.
	Name string
	// Number orders the revisions: the highest is the one delivered now.
	Number int64
	// Recorded is when the revision was last delivered.
	Recorded time.Time
	// Digest is the sha256 digest of its manifest.
	Digest string
	// Source says where its content came from.
	Source string
	// SyncRevision is the revision of its sync's content it delivered, if any.
	SyncRevision string
	// SourceRevision is the revision of the Git or OCI source it delivered, if a sync of
	// such a source made it (main@sha1:<commit>, v1@sha256:<digest>).
	SourceRevision string
	// Result is how it ended when a newer revision replaced it; empty for the newest.
	Result string
	// Checksum is the checksum of its content, when a sync delivered it.
	Checksum string
	// Body is its content.
	Body Body
}

// History reads and writes the revisions of VidraResources in one namespace.
type History struct {
	// Client writes ControllerRevisions.
	Client client.Client
	// Reader lists them (uncached: a revision is recorded only when content changes).
	Reader client.Reader
	// Namespace holds them: the operator's.
	Namespace string
	// Index, when set, is read in place of lists where it can say (see Index); it must
	// watch Namespace. Nil: every record lists.
	Index *Index
	// Store keeps the manifests of revisions. Nil: a revision holds its manifest, as
	// before there was one (readers, such as the plugin, need none).
	Store ContentStore

	// compressors are gzip writers kept between records: each new one allocates
	// hundreds of KiB, more than most manifests it compresses.
	compressors sync.Pool
}

// ContentStore keeps content by digest: the content store.
type ContentStore interface {
	Put(ctx context.Context, data []byte) (string, error)
}

// StoredLabel marks a revision whose content is named by digest, never held: Migrate
// lists the revisions without it.
const StoredLabel = "vidra.infrahub.operators.com/revision-stored"

// Name is the name of the ControllerRevision of content digest for a VidraResource.
func Name(vrName, digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	if len(hex) > 10 {
		hex = hex[:10]
	}
	const room = 253 - 11
	if len(vrName) > room {
		vrName = strings.TrimRight(vrName[:room], ".-")
	}
	return vrName + "-" + hex
}
