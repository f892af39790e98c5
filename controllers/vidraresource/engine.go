package vidraresource

import (
	"context"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// prepareApply places the bundle on its destination, adding the destination namespace
// when the bundle must create it, and builds the apply engine.
func (r *Reconciler) prepareApply(ctx context.Context, d *delivery) *outcome {
	objects, p, err := r.withDestinationNamespace(ctx, d.dest, d.vr, d.objects)
	if err != nil {
		markNotReady(d.vr, vidrav1alpha1.ReasonApplyFailed, err.Error())
		return stop(ctrl.Result{}, err)
	}
	d.addedNamespace = len(objects) > len(d.objects)
	d.objects, d.engine = objects, r.engine(ctx, d.vr, d.dest, p)
	d.previous = inventory.FromEntries(d.vr.Status.ManagedResources)
	return nil
}

// engine is the apply engine of the VidraResource on its destination, placed there as p
// says. It shares with the other VidraResources this replica delivers to the cluster
// their turns at the objects they share and what their applies left (sharedApply), and
// trusts what the drift watches have cached of an object it applied.
func (r *Reconciler) engine(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target, p placement) *apply.Engine {
	shared := r.sharedApplyOf(dest.name)
	e := &apply.Engine{
		Client:           dest.client,
		Owner:            ownership.ID(r.HubID, vr.Name),
		Adopt:            vr.Spec.AdoptExisting == vidrav1alpha1.AdoptAlways,
		DefaultNamespace: vr.Spec.Destination.Namespace,
		Parallelism:      applyParallelism,
		Seen:             p.seen,
		Latches:          &shared.latches,
		Memo:             &shared.memo,
		Current:          func(ref inventory.Ref) (string, bool) { return r.Watches.ResourceVersion(ctx, dest, ref) },
	}
	if ns := p.joins; ns != "" {
		// Its owners declare none of its fields: they only join its owners set.
		e.JoinOnly = func(ref inventory.Ref) bool {
			return ref.GVK.Group == "" && ref.GVK.Kind == "Namespace" && ref.Name == ns
		}
	}
	return e
}

// applyParallelism is how many objects of one kind a reconcile applies at once: enough
// for one large bundle to keep its member busy, while many small bundles share the member
// among the workers anyway (bench/README.md has the measurements).
const applyParallelism = 8

// sharedApply is what the VidraResources this replica reconciles share on one cluster:
// the turns they take at the objects they share (their namespace, above all), and the
// objects as their applies left them, which spares reading them before applying again.
type sharedApply struct {
	latches apply.Latches
	memo    apply.Memo

	mu sync.Mutex
	// unmanaged are destination namespaces found to exist and not be Vidra's.
	unmanaged map[string]bool
}

func (s *sharedApply) isUnmanaged(ns string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unmanaged[ns]
}

func (s *sharedApply) setUnmanaged(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unmanaged == nil {
		s.unmanaged = map[string]bool{}
	}
	s.unmanaged[ns] = true
}

func (r *Reconciler) sharedApplyOf(name multicluster.ClusterName) *sharedApply {
	s, _ := r.shared.LoadOrStore(name, &sharedApply{})
	return s.(*sharedApply)
}
