package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// defaultHistoryLimit applies when spec.historyLimit is unset (the API server defaults it).
const defaultHistoryLimit = 10

// recordOwnership records what the VidraResource is about to own before it is applied, so
// a crash in between never orphans an object: the new revision names it, or else the
// inventory in status does. Objects a newer revision recorded before an earlier reconcile
// stopped are owned too.
func (r *Reconciler) recordOwnership(ctx context.Context, d *delivery) *outcome {
	vr := d.vr
	// Health as last judged, before the inventory is written anew.
	d.judged = statusOf(vr.Status.ManagedResources)
	recorded, pending, err := r.recordRevision(ctx, vr, d.data, d.previousResult, d.desired)
	switch {
	case errors.Is(err, errHistoryUnread):
		markNotReady(vr, vidrav1alpha1.ReasonApplyFailed, err.Error())
		return stop(ctrl.Result{}, err)
	case err != nil:
		// A history that was read but not written does not hold the delivery up: the
		// inventory is then recorded in status instead (one that cannot be read does,
		// above, since it may name objects an earlier reconcile applied).
		logr.FromContextOrDiscard(ctx).Error(err, "revision not recorded", "vidraresource", vr.Name)
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.EventHistoryFailed, "revision not recorded: "+err.Error())
	}
	d.previous = inventory.Union(d.previous, pending)
	// What is known spares reads: objects new to the inventory are created without one.
	d.engine.Applied = inventory.NewSet(d.previous).Has
	if recorded {
		return nil
	}
	if err := r.recordInventory(ctx, vr, inventory.Union(d.previous, d.desired)); err != nil {
		return stop(ctrl.Result{}, err)
	}
	return nil
}

// recordRevision makes the bundle about to be applied the VidraResource's newest revision
// and sets status.revision. The revision names the objects it applies (desired), so that,
// written before the apply, it records them as the inventory would: recorded says whether
// it does, and pending is what newer revisions than the status's recorded before a
// reconcile that never wrote its status. The history is read only when the content
// differs from the one this process last recorded.
func (r *Reconciler) recordRevision(ctx context.Context, vr *vidrav1alpha1.VidraResource, data []byte, previousResult string, desired []inventory.Ref) (recorded bool, pending []inventory.Ref, err error) {
	if r.History == nil {
		return false, nil, nil
	}
	digest := nameOf(data, vr.Spec.Content)
	limit := defaultHistoryLimit
	if vr.Spec.HistoryLimit != nil {
		limit = int(*vr.Spec.HistoryLimit)
	}
	delivered := vr.Status.Revision
	memo := r.revisionMemoOf(vr, digest, limit)
	if r.recalls(vr.Name, memo) {
		// Recorded by this process, and the status says it was delivered: nothing is
		// pending, and what is new to the status is recorded there (the revision names
		// what it applied then, not what this reconcile applies).
		return false, nil, nil
	}
	body := history.Body{Manifest: vr.Spec.Manifest, Content: vr.Spec.Content}
	rec, err := r.History.Record(ctx, vr, history.Entry{
		Body: body, Digest: digest, Source: sourceOf(vr), SyncRevision: vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation],
		Checksum:       vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleChecksumAnnotation),
		PreviousResult: previousResult, Limit: limit,
		Inventory: inventory.Entries(desired), Delivered: delivered, Owned: vr.Status.ManagedResources,
	})
	pending = inventory.FromEntries(rec.Pending)
	if err != nil && !rec.Read {
		// What an earlier reconcile may have applied is unknown: nothing is applied now.
		return false, nil, fmt.Errorf("%w: %w", errHistoryUnread, err)
	}
	if err != nil {
		return false, pending, err
	}
	vr.Status.Revision = rec.Number
	// memo keeps the handover count read before the history was: had the cluster
	// changed hands since, another replica may have recorded revisions, and recalls no
	// longer matches it.
	memo.revision = rec.Number
	r.revisions.Store(vr.Name, memo)
	// Only a revision the status does not name yet (new, renumbered, or pending from a
	// reconcile that stopped) records what this one applies: one already delivered is
	// not read again as pending after a crash.
	return rec.Number > delivered && inventory.Covers(inventory.FromEntries(rec.Inventory), desired), pending, nil
}

// revisionMemoOf is what a memo of the VidraResource's revision would say now.
func (r *Reconciler) revisionMemoOf(vr *vidrav1alpha1.VidraResource, digest string, limit int) revisionMemo {
	return revisionMemo{
		uid: string(vr.UID), digest: digest, revision: vr.Status.Revision, limit: limit,
		cluster: vr.Status.Cluster, handovers: r.handoversOf(vr.Status.Cluster).Load(),
	}
}

// recalls says whether this process last recorded memo's revision for the VidraResource,
// on the same cluster, with no handover of that cluster since.
func (r *Reconciler) recalls(name string, memo revisionMemo) bool {
	last, ok := r.revisions.Load(name)
	return ok && last.(revisionMemo) == memo
}

func (r *Reconciler) handoversOf(cluster string) *atomic.Int64 {
	if n, ok := r.handovers.Load(cluster); ok {
		return n.(*atomic.Int64)
	}
	n, _ := r.handovers.LoadOrStore(cluster, new(atomic.Int64))
	return n.(*atomic.Int64)
}

// forgetRevisions forgets what this process recorded for the VidraResources of a cluster
// another replica now owns: that one may record revisions meanwhile. A reconcile still
// running records its memo afterwards; the handover count tells that memo apart.
func (r *Reconciler) forgetRevisions(cluster string) {
	r.handoversOf(cluster).Add(1)
	r.revisions.Range(func(name, memo any) bool {
		if memo.(revisionMemo).cluster == cluster {
			r.revisions.Delete(name)
		}
		return true
	})
}

// errHistoryUnread is a history that could not be read, so what a reconcile that stopped
// before writing its status recorded there is unknown.
var errHistoryUnread = errors.New("revision history not read")

// revisionMemo is the revision this process last recorded for a VidraResource.
type revisionMemo struct {
	uid, digest string
	revision    int64
	limit       int
	// cluster is the VidraResource's destination: a memo of another cluster is not
	// recalled, and one is forgotten when its cluster moves to another replica.
	cluster string
	// handovers is how many times this replica had lost the cluster when the memo was taken.
	handovers int64
}

// sourceOf says where a VidraResource's content comes from.
func sourceOf(vr *vidrav1alpha1.VidraResource) string {
	if pinned := vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]; pinned != "" {
		return "rollback to revision " + pinned
	}
	if source := history.SyncSource(vr); source != "" {
		return source
	}
	return "user"
}

// markPinned says whether a rollback holds the VidraResource's content.
func markPinned(vr *vidrav1alpha1.VidraResource) {
	pinned := vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]
	if pinned == "" {
		meta.RemoveStatusCondition(&vr.Status.Conditions, vidrav1alpha1.ConditionPinned)
		return
	}
	msg := "rolled back to revision " + pinned
	if kind, sync := vidrav1alpha1.SyncOf(vr.Labels); sync != "" {
		msg += fmt.Sprintf("; %s %s leaves it alone until `kubectl vidra rollout resume %s`", kind.Kind, sync, kind.ResumeArgument(sync))
	}
	setCondition(vr, vidrav1alpha1.ConditionPinned, metav1.ConditionTrue, vidrav1alpha1.ReasonRolledBack, msg)
}
