package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
)

// reportResults tells what the apply and the release did: on the reconcile's span, in
// Events and metrics, and to the VidraResources a conflict involves; a bundle applied
// whole is Ready, as far as applying goes.
func (r *Reconciler) reportResults(ctx context.Context, d *delivery) *outcome {
	vr := d.vr
	traceResults(ctx, d.results, d.released)
	r.eventResults(vr, d.results)
	r.Metrics.observeApply(vr.Status.Cluster, d.results)
	r.Metrics.setManaged(vr.Status.Cluster, vr.Name, len(d.kept))
	for _, holder := range r.book().record(vr.Name, r.HubID, d.results) {
		r.Watches.Requeue(holder)
	}
	changed := changedCluster(d.results) || changedCluster(d.released)
	result, err := r.summarize(vr, d.results, errors.Join(append(d.mapErrs, d.applyErr)...), d.pruneErr, changed)
	if err != nil || !meta.IsStatusConditionTrue(vr.Status.Conditions, vidrav1alpha1.ConditionReady) {
		return stop(result, err)
	}
	return nil
}

// changedCluster says whether any result changed an object on the cluster.
func changedCluster(results []apply.Result) bool {
	return slices.ContainsFunc(results, func(res apply.Result) bool { return res.Action.Changes() && res.Err == nil })
}

// summarize turns the apply and prune results into the status and the next requeue.
func (r *Reconciler) summarize(vr *vidrav1alpha1.VidraResource, results []apply.Result, applyErr, pruneErr error, changed bool) (ctrl.Result, error) {
	var conflicts []string
	for _, res := range results {
		switch res.Action {
		case apply.Conflicted:
			var fields []string
			for _, c := range res.Conflicts {
				fields = append(fields, fmt.Sprintf("%s (held by %s)", c.Field, strings.TrimPrefix(c.Manager, apply.FieldManagerPrefix)))
			}
			conflicts = append(conflicts, fmt.Sprintf("%s: %s", res.Ref, strings.Join(fields, ", ")))
		case apply.NotManaged:
			conflicts = append(conflicts, res.Err.Error())
		}
	}
	markConflict(vr, strings.Join(conflicts, "; "), r.book().heldAgainst(vr.Name))
	switch {
	case len(conflicts) > 0:
		markNotReady(vr, vidrav1alpha1.ReasonConflict, "conflicts with other owners: "+strings.Join(conflicts, "; "))
		return r.resync(), nil
	case errors.Is(applyErr, apply.ErrStalled):
		// Retrying cannot help until the bundle changes; the resync looks again in case
		// what refused it (another CRD holding its names) went away.
		markStalled(vr, vidrav1alpha1.ReasonApplyFailed, applyErr.Error())
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonApplyFailed, applyErr.Error())
		return r.resync(), nil
	case applyErr != nil:
		markNotReady(vr, vidrav1alpha1.ReasonApplyFailed, applyErr.Error())
		return ctrl.Result{}, applyErr
	case pruneErr != nil:
		markNotReady(vr, vidrav1alpha1.ReasonPruneFailed, pruneErr.Error())
		return ctrl.Result{}, pruneErr
	}
	markReady(vr, fmt.Sprintf("applied %d objects", len(vr.Status.ManagedResources)), changed)
	return r.resync(), nil
}

// resync is the result of a reconcile with nothing left to wait for: looked at again after
// the resync interval, and then behind every VidraResource with news (created, changed,
// drifted), so that a fleet's periodic checks never hold up a delivery. A resync that
// finds drift repairs it all the same.
func (r *Reconciler) resync() ctrl.Result {
	return ctrl.Result{RequeueAfter: r.ResyncInterval, Priority: ptr.To(handler.LowPriority)}
}
