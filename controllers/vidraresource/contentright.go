package vidraresource

import (
	"context"
	"fmt"
	"slices"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/policy"
)

// contentRefusedError says why a VidraResource may not deliver the stored content it
// names: a digest names content, it is no key to it.
type contentRefusedError struct{ why string }

func (e *contentRefusedError) Error() string { return e.why }

// contentRefusal says why the VidraResource may not deliver the stored content its field
// names (nil when it may). Stored content is its own when the operator wrote the
// reference (no requester is recorded: a sync stored it), when the VidraResource
// delivered it before (its history holds the digest: a rollback), or when whoever last
// wrote its spec may read the content store, as storing content there takes
// (kubectl vidra upload). Answers are kept a minute, as the deliver check's.
func (r *Reconciler) contentRefusal(ctx context.Context, vr *vidrav1alpha1.VidraResource, field, digest string) error {
	who, recorded := policy.RequesterOf(vr.Annotations)
	if !recorded {
		return nil
	}
	asked := contentCheck{generation: vr.Generation, who: who, digest: digest}
	if v, ok := r.contentChecks.Load(vr.Name + "/" + field); ok {
		if last := v.(contentCheck); last.same(asked) && time.Since(last.at) < deliverCheckTTL {
			return last.refusal()
		}
	}
	chunk := content.ChunkName(digest, 0)
	mayRead, err := policy.MayGet(ctx, r.Hub, who, "configmaps", r.Content.Namespace, chunk)
	if err != nil {
		return fmt.Errorf("whether %s may read stored content %s cannot be checked yet: %w", who.User, digest, err)
	}
	if !mayRead {
		if asked.delivered, err = r.deliveredBefore(ctx, vr, digest); err != nil {
			return err
		}
		if !asked.delivered {
			asked.why = fmt.Sprintf("%s names stored content %s, which this VidraResource never delivered, and %s, who last changed its spec, "+
				"may not read the content store (the verb get on configmaps in namespace %s, as %s): a digest is no key to another's content. "+
				"Store your own with kubectl vidra upload, or deliver through a sync",
				field, digest, who.User, r.Content.Namespace, chunk)
		}
	}
	asked.at = time.Now()
	r.contentChecks.Store(vr.Name+"/"+field, asked)
	return asked.refusal()
}

// deliveredBefore says whether the VidraResource's history holds a revision of digest.
func (r *Reconciler) deliveredBefore(ctx context.Context, vr *vidrav1alpha1.VidraResource, digest string) (bool, error) {
	if r.History == nil {
		return false, nil
	}
	revisions, err := r.History.List(ctx, vr)
	if err != nil {
		return false, fmt.Errorf("whether %s delivered %s before cannot be checked yet: %w", vr.Name, digest, err)
	}
	for _, rev := range revisions {
		if rev.Digest == digest {
			return true, nil
		}
	}
	return false, nil
}

// contentCheck is the last answer to whether a VidraResource may deliver a digest.
type contentCheck struct {
	generation int64
	who        policy.Requester
	digest     string
	delivered  bool
	why        string
	at         time.Time
}

func (c contentCheck) same(o contentCheck) bool {
	return c.generation == o.generation && c.digest == o.digest && c.who.User == o.who.User && slices.Equal(c.who.Groups, o.who.Groups)
}

func (c contentCheck) refusal() error {
	if c.why == "" {
		return nil
	}
	return &contentRefusedError{why: c.why}
}
