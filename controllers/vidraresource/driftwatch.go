package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/metawatch"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// NamespaceScope says which namespaces the watches of the cluster engaged as cl under
// name may list and watch: nil for all. current is false when cl is no longer the cluster
// engaged under that name.
type NamespaceScope func(name multicluster.ClusterName, cl cluster.Cluster) (namespaces []string, current bool)

// errNotCurrent: the cluster was engaged again meanwhile; the next reconcile watches the
// new one.
var errNotCurrent = errors.New("the cluster was engaged again meanwhile")

type clusterWatches struct {
	name    multicluster.ClusterName
	cluster cluster.Cluster
	kinds   map[schema.GroupVersionKind]*kindWatch
	// namespaces are the only namespaces watched; nil for all.
	namespaces []string
	metadata   metadata.Interface
}

type kindWatch struct {
	users map[string]bool // VidraResource names
	// watches are by namespace: "" for all, or for a cluster-scoped kind. None while the
	// kind's watches are stopped (the cluster was disengaged).
	watches map[string]*metawatch.Watch
	stop    context.CancelFunc
}

// keep is what a drift watch keeps of an object besides its identity, resourceVersion,
// generation, deletion and managers: what the apply reads of the destination namespace.
var keep = metawatch.Keep{
	Labels:        []string{vidrav1alpha1.ManagedByLabel},
	Annotations:   []string{vidrav1alpha1.OwnersAnnotation, vidrav1alpha1.PruneAnnotation},
	ManagedFields: true,
}

// clusterLocked returns the destination's watches, stopping those of a cluster object it
// replaces; w.mu is held.
func (w *DriftWatches) clusterLocked(dest *target) (*clusterWatches, error) {
	cw := w.clusters[dest.name]
	if cw != nil && cw.cluster == dest.cluster {
		return cw, nil
	}
	var namespaces []string
	if w.Scope != nil {
		var current bool
		if namespaces, current = w.Scope(dest.name, dest.cluster); !current {
			return nil, errNotCurrent
		}
	}
	client, err := metadata.NewForConfigAndClient(rest.CopyConfig(dest.cluster.GetConfig()), dest.cluster.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	kinds := map[schema.GroupVersionKind]*kindWatch{}
	if cw != nil {
		// Re-engaged with another cluster object: the old watches stop, their users stay.
		cw.stop()
		kinds = cw.kinds
	}
	next := &clusterWatches{name: dest.name, cluster: dest.cluster, kinds: kinds, namespaces: namespaces, metadata: client}
	w.clusters[dest.name] = next
	return next, nil
}

// watchLocked makes sure the kind is watched on the cluster for vr; w.mu is held.
func (w *DriftWatches) watchLocked(dest *target, vr string, gvk schema.GroupVersionKind) (*kindWatch, error) {
	cw, err := w.clusterLocked(dest)
	if err != nil {
		return nil, err
	}
	kw := cw.kinds[gvk]
	if kw == nil {
		kw = &kindWatch{users: map[string]bool{}}
		cw.kinds[gvk] = kw
	}
	if kw.watches == nil {
		if err := w.start(cw, gvk, kw); err != nil {
			if len(kw.users) == 0 {
				delete(cw.kinds, gvk)
			}
			return nil, err
		}
	}
	kw.users[vr] = true
	return kw, nil
}

// start runs the kind's watches: one for all namespaces, or one per namespace of the
// cluster's scope.
func (w *DriftWatches) start(cw *clusterWatches, gvk schema.GroupVersionKind, kw *kindWatch) error {
	mapping, err := cw.cluster.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("map kind: %w", err)
	}
	namespaces := []string{""}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && cw.namespaces != nil {
		namespaces = cw.namespaces
	}
	ctx, stop := context.WithCancel(context.Background())
	ctx = logr.NewContext(ctx, w.log.WithValues("cluster", cw.name, "kind", gvk.String()))
	kw.watches, kw.stop = make(map[string]*metawatch.Watch, len(namespaces)), stop
	for _, ns := range namespaces {
		mw := metawatch.New(metawatch.Options{
			Client: cw.metadata, Resource: mapping.Resource, Kind: gvk, Namespace: ns,
			Selector: ownership.ManagedSelector(), Keep: keep, OnChange: w.changed, OnListed: w.listed,
			Transform: trimForDrift,
		})
		kw.watches[ns] = mw
		go mw.Run(ctx)
	}
	return nil
}

// trimForDrift keeps of an object's managed fields what drift and the apply read
// (apply.TrimManagedFields), and the time of the spec managers' entries alone, the only
// ones changedBySomeone compares: Vidra's own entries then differ from object to object
// in nothing, and the watch keeps each once rather than once per second of apply.
func trimForDrift(m *metav1.PartialObjectMetadata) {
	apply.TrimManagedFields(m) // a slice of its own, changed in place below
	for i := range m.ManagedFields {
		if !isSpecManager(m.ManagedFields[i]) {
			m.ManagedFields[i].Time = nil
		}
	}
}

// changed requeues the owners of an object someone changed or removed.
func (w *DriftWatches) changed(was, now *metav1.PartialObjectMetadata) {
	switch {
	case now == nil:
		w.requeueOwners(was)
	case changedBySomeone(was, now):
		w.requeueOwners(now)
	}
}

// listed requeues the owners of an object the watch found, on listing, written by someone
// else: a change made after an owner's apply and before the watch began (it starts after
// the apply that first uses its kind) shows only there. An object only Vidra's owners
// wrote requeues nobody: the reconcile that starts a watch leaves it so.
func (w *DriftWatches) listed(now *metav1.PartialObjectMetadata) {
	if slices.ContainsFunc(now.ManagedFields, isSpecManager) {
		w.requeueOwners(now)
	}
}

// halt stops the kind's watches; its users stay.
func (kw *kindWatch) halt() {
	if kw.stop != nil {
		kw.stop()
	}
	kw.watches, kw.stop = nil, nil
}

// stop stops every watch of the cluster.
func (cw *clusterWatches) stop() {
	for _, kw := range cw.kinds {
		kw.halt()
	}
}

// disengaged stops the watches of the cluster object, which is gone; their users are
// kept, so that the cluster engaged again requeues them (Engage).
func (w *DriftWatches) disengaged(name multicluster.ClusterName, cl cluster.Cluster) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cw := w.clusters[name]; cw != nil && cw.cluster == cl {
		cw.stop()
	}
}

// drop records that vr no longer uses the kind, and stops watching it when nobody does.
func (w *DriftWatches) drop(cw *clusterWatches, gvk schema.GroupVersionKind, kw *kindWatch, vr string) {
	delete(kw.users, vr)
	if len(kw.users) > 0 {
		return
	}
	kw.halt()
	delete(cw.kinds, gvk)
}

// Watched lists the kinds watched on a cluster, sorted.
func (w *DriftWatches) Watched(name multicluster.ClusterName) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var kinds []string
	if cw := w.clusters[name]; cw != nil {
		for gvk, kw := range cw.kinds {
			if kw.watches != nil {
				kinds = append(kinds, gvk.Kind)
			}
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
// it, if that watch runs and has synced; a watch holds only objects Vidra manages, so an
// object absent from it is unknown, not gone.
func (w *DriftWatches) Cached(_ context.Context, dest *target, ref inventory.Ref) (*metav1.PartialObjectMetadata, bool) {
	w.mu.Lock()
	var mw *metawatch.Watch
	if cw := w.clusters[dest.name]; cw != nil && cw.cluster == dest.cluster {
		if kw := cw.kinds[ref.GVK]; kw != nil {
			if mw = kw.watches[""]; mw == nil {
				mw = kw.watches[ref.Namespace]
			}
		}
	}
	w.mu.Unlock()
	if mw == nil || !mw.HasSynced() {
		return nil, false
	}
	return mw.Get(ref.Namespace, ref.Name)
}

// Synced makes sure the kind is watched on the destination for the VidraResource (which is
// about to use it) and says whether its watches have synced, waiting a moment for them.
func (w *DriftWatches) Synced(ctx context.Context, dest *target, vr string, gvk schema.GroupVersionKind) bool {
	w.mu.Lock()
	kw, err := w.watchLocked(dest, vr, gvk)
	var synced []toolscache.InformerSynced
	if err == nil {
		for _, mw := range kw.watches {
			synced = append(synced, mw.HasSynced)
		}
	}
	w.mu.Unlock()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	return toolscache.WaitForCacheSync(ctx.Done(), synced...)
}

// syncWait bounds the wait for a new watch's cache; past it, the object is read.
const syncWait = 5 * time.Second
