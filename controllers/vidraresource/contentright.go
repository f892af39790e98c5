package vidraresource

import (
	"context"
	"fmt"
	"slices"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
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
// (kubectl vidra upload). On a hub whose admission records no requester, anyone may leave
// the stamp out: there an unstamped VidraResource's reference is the operator's only when
// a sync controls it (only the operator, or someone who may deliver everywhere, names a
// sync as its controller: the deliver policy checks that). Answers are kept a minute, as
// the deliver check's.
func (r *Reconciler) contentRefusal(ctx context.Context, vr *vidrav1alpha1.VidraResource, field, digest string) error {
	who, recorded := policy.RequesterOf(vr.Annotations)
	if !recorded && (r.Guards.RecordsRequester() || syncControlling(vr) != "") {
		return nil
	}
	key := contentCheckKey{name: vr.Name, field: field}
	asked := answer{generation: vr.Generation, who: who, about: digest}
	if last, ok := r.contentChecks.Load(key); ok && last.(answer).answers(asked) {
		return refusedBecause(last.(answer).why)
	}
	chunk := content.ChunkName(digest, 0)
	mayRead := false
	if recorded {
		var err error
		if mayRead, err = policy.MayGet(ctx, r.Hub, who, "secrets", r.Content.Namespace, chunk); err != nil {
			return fmt.Errorf("whether %s may read stored content %s cannot be checked yet: %w", who.User, digest, err)
		}
	}
	if !mayRead {
		delivered, err := r.deliveredBefore(ctx, vr, digest)
		if err != nil {
			return err
		}
		switch {
		case delivered:
		case recorded:
			asked.why = fmt.Sprintf("%s names stored content %s, which this VidraResource never delivered, and %s, who last changed its spec, "+
				"may not read the content store (the verb get on secrets in namespace %s, as %s): a digest is no key to another's content. "+
				"Store your own with kubectl vidra upload, or deliver through a sync",
				field, digest, who.User, r.Content.Namespace, chunk)
		default:
			asked.why = fmt.Sprintf("%s names stored content %s, which this VidraResource never delivered, and it does not say who wrote it: "+
				"this hub's API server records no requester (it serves no MutatingAdmissionPolicy, Kubernetes 1.36 on), so stored content is "+
				"delivered only by a sync's VidraResources, or by a rollback to content delivered before: a digest is no key to another's content",
				field, digest)
		}
	}
	asked.at = time.Now()
	r.contentChecks.Store(key, asked)
	return refusedBecause(asked.why)
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
	return slices.ContainsFunc(revisions, func(rev history.Revision) bool { return rev.Digest == digest }), nil
}

// contentCheckKey keys the last answer for one field of one VidraResource.
type contentCheckKey struct{ name, field string }

// refusedBecause is the refusal why says (nil when it says none).
func refusedBecause(why string) error {
	if why == "" {
		return nil
	}
	return &contentRefusedError{why: why}
}
