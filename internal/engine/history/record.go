package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// Entry is what Record is told of the delivery.
type Entry struct {
	// Body and Digest are the content delivered now.
	Body   Body
	Digest string
	// Source says where it came from ("user", a rollback, or SyncSource's words).
	Source string
	// SyncRevision is the revision of its sync's content, if any.
	SyncRevision string
	// Checksum is the checksum of the content, if a sync delivered it.
	Checksum string
	// PreviousResult is how the revision delivered until now ended, recorded on it.
	PreviousResult string
	// Limit is how many revisions are kept; 0 keeps none.
	Limit int
	// Inventory names the objects the content applies (identity fields only), kept on a
	// new revision so that the revision, written before the apply, records them.
	Inventory []vidrav1alpha1.ManagedResource
	// Delivered is the number of the revision the VidraResource's status says it
	// delivered; the inventories of revisions numbered above it are returned as pending.
	Delivered int64
	// Owned is the inventory the VidraResource's status holds. A pending revision is
	// deleted (by the limit) only once Owned, or the revision recorded now, names every
	// object it names: until then it is the only record of them.
	Owned []vidrav1alpha1.ManagedResource
}

// Recorded is what Record did.
type Recorded struct {
	// Number is the number of the revision delivered now; 0 when none is kept.
	Number int64
	// Inventory is what that revision names (nil for a revision recorded without one).
	Inventory []vidrav1alpha1.ManagedResource
	// Pending is what revisions numbered above Entry.Delivered named before this record:
	// recorded, and perhaps applied, by a reconcile that never wrote its status.
	Pending []vidrav1alpha1.ManagedResource
	// Read says the revisions were read, so Pending is complete even when Record failed.
	Read bool
}

// Record makes the content the VidraResource delivers now its newest revision and returns
// that revision's number. Content delivered before gets a new number (as a Deployment's
// rollback does), so the numbers say in which order contents were delivered. Revisions
// beyond the limit are deleted, oldest first. With a limit of 0 none is kept and 0 is
// returned.
func (h *History) Record(ctx context.Context, vr *vidrav1alpha1.VidraResource, e Entry) (Recorded, error) {
	// Read whole: those pending, which name objects, and the one of this content.
	revisions, err := h.revisionsOf(ctx, vr, func(cr *appsv1.ControllerRevision) bool {
		return cr.Revision > e.Delivered || cr.Annotations[vidrav1alpha1.RevisionDigestAnnotation] == e.Digest
	})
	if err != nil {
		return Recorded{}, err
	}
	rec := Recorded{Pending: pending(revisions, e.Delivered), Read: true}
	if e.Limit <= 0 {
		return rec, h.prune(ctx, vr, revisions, 0, e.keeps(nil))
	}
	newest, same := newestAndSame(revisions, e.Digest)
	if same != nil && same == newest {
		rec.Number, rec.Inventory = same.Revision, inventoryOf(same)
		return rec, h.prune(ctx, vr, revisions, e.Limit, e.keeps(rec.Inventory)) // a lowered limit applies at once
	}
	next := int64(1)
	if newest != nil {
		next = newest.Revision + 1
		if err := h.recordResult(ctx, vr, newest, e.PreviousResult); err != nil {
			return rec, err
		}
	}
	if same != nil {
		// Delivered again: it becomes the newest.
		if err := h.renumber(ctx, vr, same, next, e); err != nil {
			return rec, err
		}
		rec.Number, rec.Inventory = next, inventoryOf(same)
		return rec, h.prune(ctx, vr, revisions, e.Limit, e.keeps(rec.Inventory))
	}
	// The new revision names what it applies and what pending revisions named: once it
	// is written, they are no longer the only record of their objects.
	named := inventory.Entries(inventory.Union(inventory.FromEntries(e.Inventory), inventory.FromEntries(rec.Pending)))
	cr, err := h.create(ctx, vr, next, named, e)
	if err != nil {
		return rec, err
	}
	rec.Number, rec.Inventory = next, named
	return rec, h.prune(ctx, vr, append(revisions, *cr), e.Limit, e.keeps(named))
}

// keeps says which revisions the limit must keep: those numbered above the delivered one
// (pending) that name an object neither the status's inventory nor named names: until
// recorded elsewhere, they are the only record of it.
func (e Entry) keeps(named []vidrav1alpha1.ManagedResource) func(*appsv1.ControllerRevision) bool {
	recorded := inventory.NewSet(inventory.FromEntries(e.Owned), inventory.FromEntries(named))
	return func(cr *appsv1.ControllerRevision) bool {
		return cr.Revision > e.Delivered && !recorded.HasAll(inventory.FromEntries(inventoryOf(cr)))
	}
}

// newestAndSame are the newest revision and the one of content digest (nil: none).
func newestAndSame(revisions []appsv1.ControllerRevision, digest string) (newest, same *appsv1.ControllerRevision) {
	for i := range revisions {
		cr := &revisions[i]
		if newest == nil || cr.Revision > newest.Revision {
			newest = cr
		}
		if cr.Annotations[vidrav1alpha1.RevisionDigestAnnotation] == digest {
			same = cr
		}
	}
	return newest, same
}

// recordResult records on the revision delivered until now how it ended, once.
func (h *History) recordResult(ctx context.Context, vr *vidrav1alpha1.VidraResource, newest *appsv1.ControllerRevision, result string) error {
	if result == "" || newest.Annotations[vidrav1alpha1.RevisionResultAnnotation] != "" {
		return nil
	}
	patched := newest.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[vidrav1alpha1.RevisionResultAnnotation] = result
	err := h.Client.Patch(ctx, patched, client.MergeFrom(newest))
	h.noteWrite(vr, patched, err)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record the result of revision %d of %s: %w", newest.Revision, vr.Name, err)
	}
	return nil
}

// renumber makes the revision of content delivered before the newest, number next; same
// is left with its new number, by which it is pruned.
func (h *History) renumber(ctx context.Context, vr *vidrav1alpha1.VidraResource, same *appsv1.ControllerRevision, next int64, e Entry) error {
	patched := same.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	if upgraded := vidrav1alpha1.UpgradedBundleAnnotations(patched.Annotations, false); upgraded != nil {
		patched.Annotations = upgraded // the checksum under its own key only
	}
	patched.Revision = next
	patched.Annotations[vidrav1alpha1.RevisionSourceAnnotation] = e.Source
	patched.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = e.SyncRevision
	patched.Annotations[checksumAnnotation] = e.Checksum
	patched.Annotations[recordedAnnotation] = time.Now().UTC().Format(time.RFC3339)
	patched.Annotations[numberAnnotation] = strconv.FormatInt(next, 10)
	delete(patched.Annotations, vidrav1alpha1.RevisionResultAnnotation)
	err := h.Client.Patch(ctx, patched, client.MergeFromWithOptions(same, client.MergeFromWithOptimisticLock{}))
	h.noteWrite(vr, patched, err)
	if err != nil {
		return fmt.Errorf("renumber revision %d of %s: %w", same.Revision, vr.Name, err)
	}
	same.Revision = next
	return nil
}

// create writes a new revision, number next, of the content delivered now, naming the
// objects named.
func (h *History) create(ctx context.Context, vr *vidrav1alpha1.VidraResource, next int64, named []vidrav1alpha1.ManagedResource, e Entry) (*appsv1.ControllerRevision, error) {
	raw, stored, err := h.encode(ctx, e.Body, named)
	if err != nil {
		return nil, fmt.Errorf("revision of %s: %w", vr.Name, err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(vr.Name, e.Digest),
			Namespace: h.Namespace,
			Labels:    map[string]string{vidrav1alpha1.RevisionOfLabel: string(vr.UID)},
			Annotations: map[string]string{
				vidrav1alpha1.RevisionDigestAnnotation: e.Digest,
				vidrav1alpha1.RevisionSourceAnnotation: e.Source,
				vidrav1alpha1.SyncRevisionAnnotation:   e.SyncRevision,
				checksumAnnotation:                     e.Checksum,
				recordedAnnotation:                     time.Now().UTC().Format(time.RFC3339),
				vidraResourceAnnotation:                vr.Name,
				numberAnnotation:                       strconv.FormatInt(next, 10),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: vidrav1alpha1.GroupVersion.String(), Kind: "VidraResource",
				Name: vr.Name, UID: vr.UID, Controller: ptr.To(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: next,
	}
	// Labelled by its sync too, of whichever kind, so a sync's revisions are listed at once.
	if kind, sync := vidrav1alpha1.SyncOf(vr.Labels); sync != "" {
		cr.Labels[kind.Label] = sync
	}
	if stored {
		cr.Labels[StoredLabel] = "true"
	}
	err = h.Client.Create(ctx, cr)
	h.noteWrite(vr, cr, err)
	if err != nil {
		return nil, fmt.Errorf("create revision %d of %s: %w", next, vr.Name, err)
	}
	return cr, nil
}

// prune deletes the VidraResource's oldest revisions beyond limit, but none that keep
// (nil: none) holds.
func (h *History) prune(ctx context.Context, vr *vidrav1alpha1.VidraResource, revisions []appsv1.ControllerRevision, limit int, keep func(*appsv1.ControllerRevision) bool) error {
	if len(revisions) <= limit {
		return nil
	}
	slices.SortFunc(revisions, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	var errs []error
	for _, cr := range revisions[:len(revisions)-limit] {
		if keep != nil && keep(&cr) {
			continue
		}
		err := h.Client.Delete(ctx, &cr, client.Preconditions{UID: &cr.UID})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		if err == nil {
			cr.ResourceVersion = "" // gone
		}
		h.noteWrite(vr, &cr, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete revision %s: %w", cr.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Forget deletes every revision of the VidraResource, as the garbage collector would once
// it is gone: its stored content is then free to be collected at once.
func (h *History) Forget(ctx context.Context, vr *vidrav1alpha1.VidraResource) error {
	revisions, err := h.revisionsOf(ctx, vr, nil)
	if err != nil {
		return err
	}
	if err := h.prune(ctx, vr, revisions, 0, nil); err != nil {
		return err
	}
	h.Index.forget(vr.UID)
	return nil
}

// noteWrite tells the index what a write of a revision left: its resourceVersion now
// ("" when gone), or, when the write failed, that its effect is unknown.
func (h *History) noteWrite(vr *vidrav1alpha1.VidraResource, cr *appsv1.ControllerRevision, err error) {
	switch {
	case apierrors.IsNotFound(err):
		h.Index.wrote(vr.UID, cr.Name, "")
	case err != nil:
		h.Index.failed(vr.UID)
	default:
		h.Index.wrote(vr.UID, cr.Name, cr.ResourceVersion)
	}
}
