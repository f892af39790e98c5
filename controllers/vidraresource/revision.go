package vidraresource

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/history"
)

// defaultHistoryLimit applies when spec.historyLimit is unset (the API server defaults it).
const defaultHistoryLimit = 10

// recordRevision makes the bundle about to be applied the VidraResource's newest revision
// and sets status.revision. The history is read only when the content differs from the
// one this process last recorded.
func (r *Reconciler) recordRevision(ctx context.Context, vr *vidrav1alpha1.VidraResource, data []byte, previousResult string) error {
	if r.History == nil {
		return nil
	}
	digest := content.Digest(data)
	if vr.Spec.Content != nil {
		digest = vr.Spec.Content.Digest
	}
	limit := defaultHistoryLimit
	if vr.Spec.HistoryLimit != nil {
		limit = int(*vr.Spec.HistoryLimit)
	}
	memo := recorded{uid: string(vr.UID), digest: digest, revision: vr.Status.Revision, limit: limit}
	if last, ok := r.revisions.Load(vr.Name); ok && last.(recorded) == memo {
		return nil
	}
	body := history.Body{Manifest: vr.Spec.Manifest, Content: vr.Spec.Content}
	n, err := r.History.Record(ctx, vr, history.Entry{
		Body: body, Digest: digest, Source: sourceOf(vr), SyncRevision: vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation],
		Checksum:       vr.Annotations[vidrav1alpha1.ArtifactChecksumAnnotation],
		PreviousResult: previousResult, Limit: limit,
	})
	if err != nil {
		return err
	}
	vr.Status.Revision = n
	memo.revision = n
	r.revisions.Store(vr.Name, memo)
	return nil
}

// recorded is the revision this process last recorded for a VidraResource.
type recorded struct {
	uid, digest string
	revision    int64
	limit       int
}

// sourceOf says where a VidraResource's content comes from.
func sourceOf(vr *vidrav1alpha1.VidraResource) string {
	if pinned := vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]; pinned != "" {
		return "rollback to revision " + pinned
	}
	if sync := vr.Labels[vidrav1alpha1.InfrahubSyncLabel]; sync != "" {
		return fmt.Sprintf("InfrahubSync %s: artifact %s, checksum %s", sync,
			vr.Annotations[vidrav1alpha1.ArtifactIDAnnotation], vr.Annotations[vidrav1alpha1.ArtifactChecksumAnnotation])
	}
	return "user"
}

// resultOf is how the revision delivered until now stands, for the history: read before
// this reconcile changes the conditions.
func resultOf(vr *vidrav1alpha1.VidraResource) string {
	ready := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	switch {
	case ready == nil:
		return "Unknown"
	case ready.Status == metav1.ConditionTrue:
		return "Ready"
	}
	msg := ready.Reason + ": " + ready.Message
	if len(msg) > 200 {
		msg = msg[:197] + "..."
	}
	return msg
}

// markPinned says whether a rollback holds the VidraResource's content.
func markPinned(vr *vidrav1alpha1.VidraResource) {
	pinned := vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]
	if pinned == "" {
		meta.RemoveStatusCondition(&vr.Status.Conditions, vidrav1alpha1.ConditionPinned)
		return
	}
	msg := "rolled back to revision " + pinned
	if sync := vr.Labels[vidrav1alpha1.InfrahubSyncLabel]; sync != "" {
		msg += fmt.Sprintf("; InfrahubSync %s leaves it alone until `kubectl vidra rollout resume %s`", sync, sync)
	}
	setCondition(vr, vidrav1alpha1.ConditionPinned, metav1.ConditionTrue, "RolledBack", msg)
}
