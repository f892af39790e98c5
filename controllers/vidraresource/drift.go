package vidraresource

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/inventory"
	"github.com/vidra-operator/vidra/internal/ownership"
)

// DriftWatches watches, per destination cluster, the kinds VidraResources use there —
// metadata only, through the cluster's cache, which holds only objects Vidra manages — and
// requeues the owners of an object someone changed or deleted. A kind's watch starts when
// a VidraResource first uses it on a cluster and stops when none does any more.
type DriftWatches struct {
	log   logr.Logger
	hubID string
	// events feeds the VidraResource controller.
	events chan event.TypedGenericEvent[*vidrav1alpha1.VidraResource]

	mu       sync.Mutex
	clusters map[multicluster.ClusterName]*clusterWatches
	// periodicOnly holds VidraResources with reconcileOnEvents false: as in the original
	// Vidra, their drift is repaired by the periodic resync only.
	periodicOnly map[string]bool
}

type clusterWatches struct {
	cluster cluster.Cluster
	kinds   map[schema.GroupVersionKind]*kindWatch
}

type kindWatch struct {
	users        map[string]bool // VidraResource names
	registration toolscache.ResourceEventHandlerRegistration
	informer     cache.Informer
}

// NewDriftWatches returns watches that requeue VidraResources of hubID.
func NewDriftWatches(log logr.Logger, hubID string) *DriftWatches {
	return &DriftWatches{
		log:          log,
		hubID:        hubID,
		events:       make(chan event.TypedGenericEvent[*vidrav1alpha1.VidraResource], 1024),
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
	cw := w.clusterLocked(dest)
	for _, gvk := range kinds {
		if _, err := w.watchLocked(dest, cw, vr, gvk); err != nil {
			w.log.Error(err, "cannot watch kind for drift; the periodic resync still repairs it", "cluster", dest.name, "kind", gvk.String())
		}
	}
	for gvk, kw := range cw.kinds {
		if kw.users[vr] && !slices.Contains(kinds, gvk) {
			w.drop(cw, gvk, kw, vr)
		}
	}
}

// clusterLocked returns the destination's watches; w.mu is held.
func (w *DriftWatches) clusterLocked(dest *target) *clusterWatches {
	cw := w.clusters[dest.name]
	if cw == nil || cw.cluster != dest.cluster {
		// New, or re-engaged with another cluster object: the old watches died with it.
		cw = &clusterWatches{cluster: dest.cluster, kinds: map[schema.GroupVersionKind]*kindWatch{}}
		w.clusters[dest.name] = cw
	}
	return cw
}

// watchLocked makes sure the kind is watched on the cluster for vr; w.mu is held.
func (w *DriftWatches) watchLocked(dest *target, cw *clusterWatches, vr string, gvk schema.GroupVersionKind) (*kindWatch, error) {
	kw := cw.kinds[gvk]
	if kw == nil {
		var err error
		if kw, err = w.start(dest.cluster, gvk); err != nil {
			return nil, err
		}
		cw.kinds[gvk] = kw
	}
	kw.users[vr] = true
	return kw, nil
}

// Engage requeues the VidraResources that watched the cluster when it is engaged again
// with another cluster object (its kubeconfig rotated, or its token was renewed): their
// watches died with the old one, and a reconcile sets them up on the new one.
func (w *DriftWatches) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
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
				}
			}
		}()
	}
	return nil
}

// Start makes the watches a runnable of the manager, so that it engages them.
func (w *DriftWatches) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

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

func (w *DriftWatches) drop(cw *clusterWatches, gvk schema.GroupVersionKind, kw *kindWatch, vr string) {
	delete(kw.users, vr)
	if len(kw.users) > 0 {
		return
	}
	_ = kw.informer.RemoveEventHandler(kw.registration)
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := cw.cluster.GetCache().RemoveInformer(context.Background(), obj); err != nil {
		w.log.Error(err, "stop watching kind", "kind", gvk.String())
	}
	delete(cw.kinds, gvk)
}

func (w *DriftWatches) start(cl cluster.Cluster, gvk schema.GroupVersionKind) (*kindWatch, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	informer, err := cl.GetCache().GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	registration, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			if changedBySomeone(oldObj, newObj) {
				w.requeueOwners(newObj)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			w.requeueOwners(obj)
		},
	})
	if err != nil {
		return nil, err
	}
	return &kindWatch{users: map[string]bool{}, registration: registration, informer: informer}, nil
}

// changedBySomeone ignores status-only writes (controllers report status all the time)
// and keeps changes of the object's declared state.
func changedBySomeone(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
	n, ok2 := newObj.(*metav1.PartialObjectMetadata)
	if !ok1 || !ok2 {
		return true
	}
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
	return slices.DeleteFunc(slices.Clone(o.ManagedFields), func(e metav1.ManagedFieldsEntry) bool {
		return e.Subresource != "" || e.Manager == ownership.FieldManager || strings.HasPrefix(e.Manager, apply.FieldManagerPrefix)
	})
}

// requeueOwners requeues every VidraResource of this hub in the object's owners set.
func (w *DriftWatches) requeueOwners(obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	owners, err := ownership.Owners(m)
	if err != nil {
		return
	}
	for _, owner := range owners {
		name, ok := strings.CutPrefix(owner, w.hubID+"/")
		if !ok || w.isPeriodicOnly(name) {
			continue
		}
		w.events <- requeueEvent(name)
	}
}

func (w *DriftWatches) isPeriodicOnly(vr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.periodicOnly[vr]
}

// Requeue asks for the VidraResource to be reconciled again.
func (w *DriftWatches) Requeue(vr string) {
	w.events <- requeueEvent(vr)
}

// requeueEvent asks the controller to reconcile the VidraResource name.
func requeueEvent(name string) event.TypedGenericEvent[*vidrav1alpha1.VidraResource] {
	vr := &vidrav1alpha1.VidraResource{}
	vr.Name = name
	return event.TypedGenericEvent[*vidrav1alpha1.VidraResource]{Object: vr}
}

// Watched lists the kinds watched on a cluster, sorted.
func (w *DriftWatches) Watched(name multicluster.ClusterName) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var kinds []string
	if cw := w.clusters[name]; cw != nil {
		for gvk := range cw.kinds {
			kinds = append(kinds, gvk.Kind)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// ResourceVersion is the object's resourceVersion as the drift watch of its kind on the
// destination has it (see Cached).
func (w *DriftWatches) ResourceVersion(ctx context.Context, dest *target, ref inventory.Ref) (string, bool) {
	obj, ok := w.Cached(ctx, dest, ref)
	if !ok {
		return "", false
	}
	return obj.ResourceVersion, true
}

// Cached is the object's metadata as the drift watch of its kind on the destination has
// it, if that watch runs and has synced; the cache holds only objects Vidra manages, so
// an object absent from it is unknown, not gone.
func (w *DriftWatches) Cached(ctx context.Context, dest *target, ref inventory.Ref) (*metav1.PartialObjectMetadata, bool) {
	w.mu.Lock()
	cw := w.clusters[dest.name]
	var kw *kindWatch
	if cw != nil && cw.cluster == dest.cluster {
		kw = cw.kinds[ref.GVK]
	}
	w.mu.Unlock()
	if kw == nil || !kw.informer.HasSynced() {
		return nil, false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.GVK)
	if err := dest.cluster.GetCache().Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
		return nil, false
	}
	return obj, true
}

// Synced makes sure the kind is watched on the destination for the VidraResource (which is
// about to use it) and says whether its cache has synced, waiting a moment for it.
func (w *DriftWatches) Synced(ctx context.Context, dest *target, vr string, gvk schema.GroupVersionKind) bool {
	w.mu.Lock()
	kw, err := w.watchLocked(dest, w.clusterLocked(dest), vr, gvk)
	w.mu.Unlock()
	if err != nil {
		return false
	}
	informer := kw.informer
	ctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	return toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
}

// syncWait bounds the wait for a new watch's cache; past it, the object is read.
const syncWait = 5 * time.Second
