package vidraresource

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// DriftWatches watches, per destination cluster, the kinds VidraResources use there —
// the metadata of the objects Vidra manages, and of those only what drift and ownership
// read (metawatch) — and requeues the owners of an object someone changed or deleted. A
// kind's watch starts when a VidraResource first uses it on a cluster and stops when none
// does any more, or when the cluster is disengaged.
type DriftWatches struct {
	log   logr.Logger
	hubID string
	// Scope says which namespaces a cluster's watches may list; nil: all, on every cluster.
	Scope NamespaceScope
	// events feeds the VidraResource controller.
	events chan event.TypedGenericEvent[*vidrav1alpha1.VidraResource]

	// needLeader: the watches run and stop beside the VidraResource controller (sharded,
	// that runs on every replica).
	needLeader bool
	// stopped is closed when the watches stop with the controller. A requeue then has no
	// reader, and once the buffer is full a send would wait for ever, holding a worker (a
	// slot's wake-up), the coordinator (a cluster gained) or a watch: it is dropped.
	stopped chan struct{}

	mu       sync.Mutex
	clusters map[multicluster.ClusterName]*clusterWatches
	// periodicOnly holds VidraResources with reconcileOnEvents false: as in the original
	// Vidra, their drift is repaired by the periodic resync only.
	periodicOnly map[string]bool
}

// NewDriftWatches returns watches that requeue VidraResources of hubID.
func NewDriftWatches(log logr.Logger, hubID string) *DriftWatches {
	return &DriftWatches{
		log:          log,
		hubID:        hubID,
		events:       make(chan event.TypedGenericEvent[*vidrav1alpha1.VidraResource], 1024),
		needLeader:   true,
		stopped:      make(chan struct{}),
		clusters:     map[multicluster.ClusterName]*clusterWatches{},
		periodicOnly: map[string]bool{},
	}
}

// Use records that the VidraResource uses exactly these kinds on the destination: watches
// start for new kinds and stop for kinds nobody uses any more.
func (w *DriftWatches) Use(dest *target, vr string, kinds []schema.GroupVersionKind, onEvents bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if onEvents {
		delete(w.periodicOnly, vr)
	} else {
		w.periodicOnly[vr] = true
	}
	for _, gvk := range kinds {
		if _, err := w.watchLocked(dest, vr, gvk); err != nil {
			w.log.Error(err, "cannot watch kind for drift; the periodic resync still repairs it", "cluster", dest.name, "kind", gvk.String())
		}
	}
	cw := w.clusters[dest.name]
	if cw == nil || cw.cluster != dest.cluster {
		return
	}
	for gvk, kw := range cw.kinds {
		if kw.users[vr] && !slices.Contains(kinds, gvk) {
			w.drop(cw, gvk, kw, vr)
		}
	}
}

// Engage requeues the VidraResources that watched the cluster when it is engaged again
// with another cluster object (its kubeconfig rotated, or its token was renewed): their
// watches stopped with the old one, and a reconcile sets them up on the new one. The
// cluster's watches stop when it is disengaged (ctx ends).
func (w *DriftWatches) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	context.AfterFunc(ctx, func() { w.disengaged(name, cl) })
	w.mu.Lock()
	var users []string
	if cw := w.clusters[name]; cw != nil && cw.cluster != cl {
		for _, kw := range cw.kinds {
			for vr := range kw.users {
				if !slices.Contains(users, vr) {
					users = append(users, vr)
				}
			}
		}
	}
	w.mu.Unlock()
	if len(users) > 0 {
		// Not while the manager engages the cluster: the queue may be full.
		go func() {
			for _, name := range users {
				select {
				case w.events <- requeueEvent(name):
				case <-ctx.Done():
					return
				case <-w.stopped:
					return
				}
			}
		}()
	}
	return nil
}

// Start makes the watches a runnable of the manager, so that it engages them; they all
// stop with it.
func (w *DriftWatches) Start(ctx context.Context) error {
	<-ctx.Done()
	close(w.stopped)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cw := range w.clusters {
		cw.stop()
	}
	return nil
}

// NeedLeaderElection puts the watches in the manager's group of the VidraResource
// controller, so that both stop at once: the controller's workers may be sending requeues.
func (w *DriftWatches) NeedLeaderElection() bool { return w.needLeader }

// Forget stops every watch on the cluster: another replica reconciles it now.
func (w *DriftWatches) Forget(name multicluster.ClusterName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cw := w.clusters[name]
	if cw == nil {
		return
	}
	for gvk, kw := range cw.kinds {
		for vr := range kw.users {
			w.drop(cw, gvk, kw, vr)
		}
	}
	delete(w.clusters, name)
}

// Release records that the VidraResource uses nothing on the cluster any more.
func (w *DriftWatches) Release(name multicluster.ClusterName, vr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.periodicOnly, vr)
	cw := w.clusters[name]
	if cw == nil {
		return
	}
	for gvk, kw := range cw.kinds {
		if kw.users[vr] {
			w.drop(cw, gvk, kw, vr)
		}
	}
}

// changedBySomeone ignores status-only writes (controllers report status all the time)
// and keeps changes of the object's declared state.
func changedBySomeone(o, n *metav1.PartialObjectMetadata) bool {
	if o.Generation != n.Generation {
		return true
	}
	return !slices.EqualFunc(specManagers(o), specManagers(n), func(a, b metav1.ManagedFieldsEntry) bool {
		return a.Manager == b.Manager && a.Operation == b.Operation && a.Time.Equal(b.Time)
	})
}

// specManagers are the managers of an object's declared state, Vidra's own left out: its
// owners never force over each other (a conflict goes to the conflict book), so their
// writes — an owner joining a shared namespace, a sibling's apply — are no drift, and
// counting them would reconcile every owner of a shared object once more.
func specManagers(o *metav1.PartialObjectMetadata) []metav1.ManagedFieldsEntry {
	return slices.DeleteFunc(slices.Clone(o.ManagedFields), func(e metav1.ManagedFieldsEntry) bool { return !isSpecManager(e) })
}

// isSpecManager says whether the entry is one of specManagers.
func isSpecManager(e metav1.ManagedFieldsEntry) bool {
	return e.Subresource == "" && e.Manager != ownership.FieldManager && !strings.HasPrefix(e.Manager, apply.FieldManagerPrefix)
}

// requeueOwners requeues every VidraResource of this hub in the object's owners set.
func (w *DriftWatches) requeueOwners(m *metav1.PartialObjectMetadata) {
	owners, err := ownership.Owners(m)
	if err != nil {
		return
	}
	for _, owner := range owners {
		name, ok := strings.CutPrefix(owner, w.hubID+"/")
		if !ok || w.isPeriodicOnly(name) {
			continue
		}
		w.send(name)
	}
}

func (w *DriftWatches) isPeriodicOnly(vr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.periodicOnly[vr]
}

// Requeue asks for the VidraResource to be reconciled again.
func (w *DriftWatches) Requeue(vr string) { w.send(vr) }

// send requeues the VidraResource name, unless the watches have stopped.
func (w *DriftWatches) send(name string) {
	select {
	case w.events <- requeueEvent(name):
	case <-w.stopped:
	}
}

// requeueEvent asks the controller to reconcile the VidraResource name.
func requeueEvent(name string) event.TypedGenericEvent[*vidrav1alpha1.VidraResource] {
	vr := &vidrav1alpha1.VidraResource{}
	vr.Name = name
	return event.TypedGenericEvent[*vidrav1alpha1.VidraResource]{Object: vr}
}
