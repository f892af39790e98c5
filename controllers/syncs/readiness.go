package syncs

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// settledPass is a sync's last full pass that delivered all the sync lists: of which
// generation, and what it delivered, as Ready says it.
type settledPass struct {
	generation int64
	delivered  string
}

// refresh recomputes the readiness of a sync that a VidraResource's change of health
// woke, from its VidraResources in the cache, without reading its source. Only after
// a full pass that delivered all the sync lists, of the sync's generation: else its
// own request is on its way, or its Ready says why its last pass failed, which no
// VidraResource's health changes.
func (r *Reconciler) refresh(ctx context.Context, obj Object) (ctrl.Result, error) {
	v, ok := r.settled.Load(obj.GetName())
	pass, _ := v.(settledPass)
	if !ok || pass.generation != obj.GetGeneration() || fanout.Progressive(obj.RolloutSpec()) {
		return ctrl.Result{}, nil
	}
	// Read only, and as many as the sync reaches clusters: not copied.
	vrs, err := fanout.Owned(ctx, r.Hub, obj, client.UnsafeDisableDeepCopy)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.markDelivered(obj, pass.delivered, fanout.Judge(vrs, fanout.Checksums(obj.Bundles()), nil))
	return ctrl.Result{}, nil
}

// markDelivered says that a sync delivered all it lists (delivered, in the kind's
// words) and, for a sync that waits, where that is in effect (ready): Ready on every
// cluster, Progressing while some are not yet, or VidraResourceFailed naming the
// clusters where it failed. A sync that does not wait is Ready once delivered.
func (r *Reconciler) markDelivered(obj Object, delivered string, ready fanout.Readiness) {
	if !obj.Waits() {
		obj.SetClusters(nil)
		markSucceeded(obj, delivered)
		return
	}
	counts := ready.Counts
	obj.SetClusters(&counts)
	r.recordFailures(obj, ready.Failures())
	switch {
	case ready.Failed():
		markFailed(obj, vidrav1alpha1.ReasonVidraResourceFailed, ready.Message())
	case !ready.Ready():
		markPending(obj, ready.Message())
	case counts.Total == 0:
		markSucceeded(obj, delivered)
	default:
		markSucceeded(obj, delivered+"; "+ready.Message())
	}
}
