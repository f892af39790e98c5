package vidraresource

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
)

// reconcileDelete releases every object, then removes the finalizer. An engaged but
// unreachable cluster holds the deletion; an un-enrolled one does not, and what was left
// on it is listed in a Warning Event.
func (r *Reconciler) reconcileDelete(ctx context.Context, vr *vidrav1alpha1.VidraResource) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(vr, vidrav1alpha1.VidraResourceFinalizer) {
		return ctrl.Result{}, nil
	}
	if cluster, ok := r.pullCluster(ctx, vr); ok {
		done, err := r.reconcileDeletePull(ctx, vr, cluster)
		if err != nil || !done {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.finalize(ctx, vr, nil)
	}
	if err := r.withdrawBundle(ctx, vr); err != nil {
		return ctrl.Result{}, err
	}
	refs := inventory.FromEntries(vr.Status.ManagedResources)
	if r.History != nil {
		// Objects a revision recorded before a reconcile stopped without its status.
		pending, err := r.History.Pending(ctx, vr)
		if err != nil {
			markNotReady(vr, vidrav1alpha1.ReasonDeleting, err.Error())
			return ctrl.Result{}, err
		}
		refs = inventory.Union(refs, inventory.FromEntries(pending))
	}
	dest, err := r.target(ctx, vr)
	switch {
	case errors.Is(err, errClusterNotEngaged) && !r.clusterEnrolled(ctx, dest):
		if len(refs) > 0 {
			r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonDeleting,
				fmt.Sprintf("cluster %q is no longer enrolled; left on it: %s", dest.name, inventory.Join(refs)))
		}
	case err != nil && len(refs) == 0:
		// Nothing was ever applied (the destination never resolved): nothing to release.
	case err != nil:
		markNotReady(vr, vidrav1alpha1.ReasonDeleting, "waiting for the destination to release objects: "+err.Error())
		return ctrl.Result{RequeueAfter: destinationRetry}, nil
	default:
		released, err := r.engine(ctx, vr, dest, placement{}).Release(ctx, refs, prunes(vr))
		r.eventResults(vr, released)
		if err != nil {
			markNotReady(vr, vidrav1alpha1.ReasonDeleting, "releasing objects: "+err.Error())
			return ctrl.Result{}, err
		}
		r.Watches.Release(dest.name, vr.Name)
	}
	return ctrl.Result{}, r.finalize(ctx, vr, dest)
}

// finalize forgets what this process knows of the deleted VidraResource, its history,
// and lets it go.
func (r *Reconciler) finalize(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target) error {
	if dest != nil {
		r.sharedApplyOf(dest.name).memo.Forget(ownership.ID(r.HubID, vr.Name))
	}
	for _, holder := range r.book().forget(vr.Name) {
		r.Watches.Requeue(holder)
	}
	r.Metrics.setManaged(vr.Status.Cluster, vr.Name, 0)
	if r.History != nil {
		if err := r.History.Forget(ctx, vr); err != nil {
			// Owned by the VidraResource, they go with it through the garbage collector.
			logr.FromContextOrDiscard(ctx).Error(err, "revisions not deleted", "vidraresource", vr.Name)
		}
	}
	finalized := vr.DeepCopy()
	controllerutil.RemoveFinalizer(vr, vidrav1alpha1.VidraResourceFinalizer)
	if err := r.Hub.Patch(ctx, vr, client.MergeFromWithOptions(finalized, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	r.written.Delete(vr.Name)
	r.revisions.Delete(vr.Name)
	r.deliverChecks.Delete(vr.Name)
	r.contentChecks.Delete(contentCheckKey{name: vr.Name, field: "spec.content"})
	r.contentChecks.Delete(contentCheckKey{name: vr.Name, field: "spec.preview"})
	return nil
}

// clusterEnrolled says whether a VidraCluster still shows the cluster.
func (r *Reconciler) clusterEnrolled(ctx context.Context, dest *target) bool {
	if dest == nil || dest.name == destination.LocalCluster {
		return dest != nil
	}
	err := r.Hub.Get(ctx, client.ObjectKey{Name: string(dest.name)}, &vidrav1alpha1.VidraCluster{})
	return err == nil
}
