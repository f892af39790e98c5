package vidraresource

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// dependencyPoll is how soon a VidraResource that waits for a dependency looks again
// when no change of the dependency's VidraResources wakes it first (dependentsOf).
const dependencyPoll = 30 * time.Second

// awaitDependencies holds a new spec until each sync the VidraResource depends on is
// Ready on its cluster: every VidraResource of that sync there Ready at the sync's
// current revision. Only a spec not yet applied waits: what was applied stays, and its
// drift is repaired, whatever becomes of a dependency later, as a running Deployment
// does not stop when its CRD's operator restarts.
func (r *Reconciler) awaitDependencies(ctx context.Context, d *delivery) *outcome {
	vr := d.vr
	if len(vr.Spec.DependsOn) == 0 || appliedCurrent(vr) {
		return nil
	}
	cluster := fanout.ClusterOf(vr)
	for _, dep := range vr.Spec.DependsOn {
		why, err := r.dependencyWait(ctx, dep, cluster)
		if err != nil {
			return stop(ctrl.Result{}, err)
		}
		if why != "" {
			msg := fmt.Sprintf("waiting for %s %s on %s: %s", dep.Kind, dep.Name, cluster, why)
			conditions.MarkNotReady(vr, vidrav1alpha1.ReasonDependencyNotReady, msg)
			conditions.MarkReconciling(vr, vidrav1alpha1.ReasonDependencyNotReady, msg)
			vr.Status.DeployState = vidrav1alpha1.StatePending
			return stop(ctrl.Result{RequeueAfter: dependencyPoll}, nil)
		}
	}
	return nil
}

// noteApplied records when a new spec is first applied (status.appliedAt): an object
// still in progress spec.timeout after it has failed.
func (r *Reconciler) noteApplied(_ context.Context, d *delivery) *outcome {
	if !appliedCurrent(d.vr) || d.vr.Status.AppliedAt == nil {
		now := metav1.Now()
		d.vr.Status.AppliedAt = &now
	}
	return nil
}

// appliedCurrent says whether the VidraResource's current spec was applied (or tried):
// its Ready condition describes its generation, and not as waiting for a dependency.
func appliedCurrent(vr *vidrav1alpha1.VidraResource) bool {
	c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	return c != nil && c.ObservedGeneration == vr.Generation && c.Reason != vidrav1alpha1.ReasonDependencyNotReady
}

// dependencyWait says why dep is not Ready on cluster ("" when it is).
func (r *Reconciler) dependencyWait(ctx context.Context, dep vidrav1alpha1.SyncReference, cluster string) (string, error) {
	sync, err := fanout.SyncOf(ctx, r.Hub, dep)
	if err != nil || sync == nil {
		return "it does not exist", err
	}
	owned, err := fanout.Owned(ctx, r.Hub, sync, client.UnsafeDisableDeepCopy)
	if err != nil {
		return "", err
	}
	there := slices.DeleteFunc(owned, func(vr *vidrav1alpha1.VidraResource) bool { return fanout.ClusterOf(vr) != cluster })
	if len(there) == 0 {
		return "it delivers nothing to this cluster (yet)", nil
	}
	ready := fanout.Judge(there, fanout.Checksums(sync.Bundles()), nil)
	if ready.Ready() {
		return "", nil
	}
	return ready.Why(), nil
}

// byDependencyField indexes the hub's cached VidraResources by the syncs they depend
// on ("<kind>/<name>"), so that a dependency's change of health wakes its dependents.
const byDependencyField = "vidra.dependsOn"

func dependenciesOf(obj client.Object) []string {
	vr, ok := obj.(*vidrav1alpha1.VidraResource)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(vr.Spec.DependsOn))
	for _, dep := range vr.Spec.DependsOn {
		keys = append(keys, dep.Kind+"/"+dep.Name)
	}
	return keys
}

// indexByDependency registers byDependencyField with the hub's cache.
func indexByDependency(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &vidrav1alpha1.VidraResource{}, byDependencyField, dependenciesOf); err != nil {
		return fmt.Errorf("index VidraResources by dependency: %w", err)
	}
	return nil
}

// dependentsOf requeues the VidraResources on obj's cluster that wait for obj's sync.
func (r *Reconciler) dependentsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	vr, ok := obj.(*vidrav1alpha1.VidraResource)
	owner := metav1.GetControllerOf(obj)
	if !ok || owner == nil {
		return nil
	}
	var list vidrav1alpha1.VidraResourceList
	if err := r.Hub.List(ctx, &list, client.MatchingFields{byDependencyField: owner.Kind + "/" + owner.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	cluster := fanout.ClusterOf(vr)
	var requests []reconcile.Request
	for i := range list.Items {
		if dependent := &list.Items[i]; fanout.ClusterOf(dependent) == cluster && !appliedCurrent(dependent) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(dependent)})
		}
	}
	return requests
}
