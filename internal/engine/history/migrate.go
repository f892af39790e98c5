package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Migration moves into the content store the manifests that revisions recorded by earlier
// versions hold, on the leader: at start, again soon while some wait, then now and again
// for revisions that a replica of an earlier version records during a rolling upgrade.
type Migration struct {
	History *History
	// Retry is how soon a pass that left revisions waiting runs again; Interval, how
	// often passes run otherwise.
	Retry, Interval time.Duration
	Log             logr.Logger
}

// NeedLeaderElection is true: one replica migrates.
func (m *Migration) NeedLeaderElection() bool { return true }

// Start migrates until ctx ends.
func (m *Migration) Start(ctx context.Context) error {
	for {
		next := m.Interval
		migrated, waiting, err := m.History.Migrate(ctx)
		switch {
		case err != nil:
			m.Log.Error(err, "move revisions' manifests into the content store", "migrated", migrated, "waiting", waiting)
			next = m.Retry
		case waiting > 0:
			next = m.Retry
		}
		if migrated > 0 || waiting > 0 {
			m.Log.Info("moved revisions' manifests into the content store", "migrated", migrated, "waiting", waiting)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// migratePage is how many revisions a pass reads at once.
const migratePage = 100

// Migrate moves the manifest each revision in the namespace holds into the store, and
// marks every revision that names its content (StoredLabel). A revision's data cannot
// change, so one holding a manifest is deleted and created again, with the same name,
// number, owner and annotations. A crash in between loses it, so a revision numbered
// above the one its VidraResource's status says it delivered waits (it may be the only
// record of objects a reconcile applied): waiting says how many did.
func (h *History) Migrate(ctx context.Context) (migrated, waiting int, err error) {
	unmarked, _ := labels.NewRequirement(StoredLabel, selection.DoesNotExist, nil)
	owned, _ := labels.NewRequirement(vidrav1alpha1.RevisionOfLabel, selection.Exists, nil)
	selector := client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*owned, *unmarked)}
	delivered := map[types.UID]int64{} // per VidraResource, status.revision; -1: gone
	var errs []error
	var page appsv1.ControllerRevisionList
	for {
		if err := h.Reader.List(ctx, &page, client.InNamespace(h.Namespace), selector,
			client.Limit(migratePage), client.Continue(page.Continue)); err != nil {
			return migrated, waiting, fmt.Errorf("list revisions to migrate: %w", err)
		}
		for i := range page.Items {
			outcome, err := h.migrate(ctx, &page.Items[i], delivered)
			if err != nil {
				errs = append(errs, err)
			}
			switch outcome {
			case moved:
				migrated++
			case waits:
				waiting++
			}
		}
		if page.Continue == "" {
			return migrated, waiting, errors.Join(errs...)
		}
	}
}

// outcome is what a pass did with one revision.
type outcome int

const (
	moved   outcome = iota // its content named, not held
	waits                  // for its VidraResource to deliver it, or for the next pass
	skipped                // not Vidra's to move: ownerless, or its owner gone
)

// migrate moves one revision's manifest into the store.
func (h *History) migrate(ctx context.Context, cr *appsv1.ControllerRevision, delivered map[types.UID]int64) (outcome, error) {
	var d data
	if err := json.Unmarshal(cr.Data.Raw, &d); err != nil {
		return skipped, fmt.Errorf("revision %s: decode: %w", cr.Name, err)
	}
	if d.Content != nil {
		return moved, h.mark(ctx, cr)
	}
	owner := metav1.GetControllerOf(cr)
	if owner == nil {
		return skipped, nil
	}
	number, err := h.deliveredOf(ctx, owner, delivered)
	switch {
	case err != nil:
		return waits, err
	case number < 0:
		return skipped, nil // the garbage collector's
	case cr.Revision > number:
		return waits, nil
	}
	manifest, err := decompress(d.Manifest)
	if err != nil {
		return skipped, fmt.Errorf("revision %s: %w", cr.Name, err)
	}
	digest, err := h.Store.Put(ctx, []byte(manifest))
	if err != nil {
		return waits, fmt.Errorf("revision %s: store the manifest: %w", cr.Name, err)
	}
	d.Manifest, d.Content = nil, &vidrav1alpha1.ContentReference{Digest: digest}
	raw, err := json.Marshal(d)
	if err != nil {
		return waits, fmt.Errorf("revision %s: %w", cr.Name, err)
	}
	return h.recreate(ctx, cr, raw)
}

// recreate writes cr again with data raw, as migrated; the delete is conditional on cr
// being as read, so a revision renumbered or deleted meanwhile is left to the next pass.
func (h *History) recreate(ctx context.Context, cr *appsv1.ControllerRevision, raw []byte) (outcome, error) {
	again := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: cr.Name, Namespace: cr.Namespace, Labels: cr.Labels, Annotations: cr.Annotations,
			OwnerReferences: cr.OwnerReferences,
		},
		Data:     cr.Data,
		Revision: cr.Revision,
	}
	again.Data.Raw = raw
	if again.Labels == nil {
		again.Labels = map[string]string{}
	}
	again.Labels[StoredLabel] = "true"
	if err := h.Client.Delete(ctx, cr, client.Preconditions{UID: &cr.UID, ResourceVersion: &cr.ResourceVersion}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return waits, nil
		}
		return waits, fmt.Errorf("revision %s: delete to migrate: %w", cr.Name, err)
	}
	// Its content is held in memory only until written again: tried for about a minute
	// while the API server answers anything but that it exists (recorded anew meanwhile).
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 10, Cap: 15 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := h.Client.Create(ctx, again)
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	if err != nil {
		return skipped, fmt.Errorf("revision %s (number %d) deleted to migrate and not created again: %w", cr.Name, cr.Revision, err)
	}
	return moved, nil
}

// mark labels a revision that names its content already.
func (h *History) mark(ctx context.Context, cr *appsv1.ControllerRevision) error {
	patch := client.MergeFrom(cr.DeepCopy())
	if cr.Labels == nil {
		cr.Labels = map[string]string{}
	}
	cr.Labels[StoredLabel] = "true"
	if err := h.Client.Patch(ctx, cr, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("revision %s: mark as stored: %w", cr.Name, err)
	}
	return nil
}

// deliveredOf is the number of the revision owner's status says it delivered (-1 when
// it is gone), read once per pass.
func (h *History) deliveredOf(ctx context.Context, owner *metav1.OwnerReference, delivered map[types.UID]int64) (int64, error) {
	if n, ok := delivered[owner.UID]; ok {
		return n, nil
	}
	vr := &vidrav1alpha1.VidraResource{}
	err := h.Client.Get(ctx, client.ObjectKey{Name: owner.Name}, vr)
	switch {
	case apierrors.IsNotFound(err):
		delivered[owner.UID] = -1
	case err != nil:
		return 0, fmt.Errorf("read VidraResource %s: %w", owner.Name, err)
	case vr.UID != owner.UID:
		delivered[owner.UID] = -1
	default:
		delivered[owner.UID] = vr.Status.Revision
	}
	return delivered[owner.UID], nil
}
