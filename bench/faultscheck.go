package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// violations counts what the checkers found and writes each to the history.
type violations struct {
	mu      sync.Mutex
	counts  map[string]int
	history *history
}

func newViolations(h *history) *violations {
	v := &violations{counts: map[string]int{}, history: h}
	for _, c := range checkerNames {
		v.counts[c] = 0
	}
	return v
}

func (v *violations) found(checker, format string, args ...any) {
	v.mu.Lock()
	v.counts[checker]++
	v.mu.Unlock()
	v.history.record("VIOLATION %s: %s", checker, fmt.Sprintf(format, args...))
}

func (v *violations) snapshot() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.counts)
}

// listWatch lists newList's kind on c (with opts), gives the items to listed, then
// watches from the list's version and gives each event to event. A watch that ends (an
// API server stopped) is resumed from the last version seen, a second later, so that
// every change in between is still given; only when that fails (the version is gone, or
// the API server is still down) does it list again, and a deletion missed meanwhile
// shows in that list. Until ctx ends.
func listWatch(ctx context.Context, c client.WithWatch, newList func() client.ObjectList, opts []client.ListOption,
	listed func([]client.Object), event func(watch.EventType, client.Object)) {
	version := ""
	for ctx.Err() == nil {
		if version == "" {
			list := newList()
			if err := c.List(ctx, list, opts...); err == nil {
				listed(listItems(list))
				version = list.GetResourceVersion()
			}
		}
		if version != "" {
			version = watchFrom(ctx, c, newList, opts, version, event)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// watchFrom watches from version until the watch ends, and returns the version to
// resume from: "" when the watch could not start or ended in an error (list again).
func watchFrom(ctx context.Context, c client.WithWatch, newList func() client.ObjectList, opts []client.ListOption,
	version string, event func(watch.EventType, client.Object)) string {
	raw := &metav1.ListOptions{ResourceVersion: version, AllowWatchBookmarks: true}
	w, err := c.Watch(ctx, newList(), append(opts, &client.ListOptions{Raw: raw})...)
	if err != nil {
		return ""
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		obj, ok := ev.Object.(client.Object)
		switch {
		case ev.Type == watch.Error || !ok:
			return ""
		case ev.Type == watch.Bookmark:
			version = obj.GetResourceVersion()
		default:
			version = obj.GetResourceVersion()
			event(ev.Type, obj)
		}
	}
	return version
}

func listItems(list client.ObjectList) []client.Object {
	var items []client.Object
	_ = apimeta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			items = append(items, obj)
		}
		return nil
	})
	return items
}

// objectChecker follows the delivered ConfigMaps of one cluster: any of them gone is
// deletedWhileOwned (no revision of the phase drops an object, and the shared one always
// has owners), any seen under a second UID is recreated.
type objectChecker struct {
	cluster string
	found   *violations
	mu      sync.Mutex
	// first is each object's first UID; present those there now.
	first   map[string]types.UID
	present map[string]bool
}

func newObjectChecker(cluster string, found *violations) *objectChecker {
	return &objectChecker{cluster: cluster, found: found, first: map[string]types.UID{}, present: map[string]bool{}}
}

// options are what the checker lists: the phase's namespace, Vidra's objects.
func (o *objectChecker) options() []client.ListOption {
	return []client.ListOption{client.InNamespace(faultsNamespace), client.MatchingLabels{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}}
}

func (o *objectChecker) listed(items []client.Object) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := map[string]bool{}
	for _, obj := range items {
		now[obj.GetName()] = true
		o.seenLocked(obj)
	}
	for name := range o.present {
		if !now[name] {
			o.goneLocked(name, "missing from a list")
		}
	}
}

func (o *objectChecker) event(t watch.EventType, obj client.Object) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t == watch.Deleted {
		o.goneLocked(obj.GetName(), "a watch saw it deleted")
		return
	}
	o.seenLocked(obj)
}

func (o *objectChecker) seenLocked(obj client.Object) {
	name := obj.GetName()
	if first, ok := o.first[name]; !ok {
		o.first[name] = obj.GetUID()
	} else if first != obj.GetUID() {
		if o.present[name] {
			o.goneLocked(name, "replaced between two looks")
		}
		o.found.found(recreated, "ConfigMap %s/%s on %s: UID %s, first seen as %s", faultsNamespace, name, o.cluster, obj.GetUID(), first)
		o.first[name] = obj.GetUID()
	}
	o.present[name] = true
}

func (o *objectChecker) goneLocked(name, how string) {
	if !o.present[name] {
		return
	}
	delete(o.present, name)
	o.found.found(deletedWhileOwned, "ConfigMap %s/%s on %s (%s) while its bundles still hold it", faultsNamespace, name, o.cluster, how)
}

// resourceChecker follows the hub's VidraResources: two live ones for one sync, bundle
// and cluster are duplicateVidraResource.
type resourceChecker struct {
	found *violations
	mu    sync.Mutex
	// live is each VidraResource's key (sync, bundle, cluster); reported the keys found.
	live     map[string]string
	reported map[string]bool
}

func newResourceChecker(found *violations) *resourceChecker {
	return &resourceChecker{found: found, live: map[string]string{}, reported: map[string]bool{}}
}

// resourceKey is who a VidraResource delivers for and where; "" when no sync made it.
func resourceKey(vr *vidrav1alpha1.VidraResource) string {
	for _, k := range vidrav1alpha1.SyncKinds() {
		if sync := vr.Labels[k.Label]; sync != "" {
			return fmt.Sprintf("%s %s, bundle %s, cluster %s", k.Kind, sync, vr.Annotations[vidrav1alpha1.BundleIDAnnotation], vr.Spec.Destination.Cluster)
		}
	}
	return ""
}

func (r *resourceChecker) listed(items []client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.live)
	for _, obj := range items {
		r.noteLocked(obj)
	}
	r.checkLocked()
}

func (r *resourceChecker) event(t watch.EventType, obj client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, obj.GetName())
	if t != watch.Deleted {
		r.noteLocked(obj)
	}
	r.checkLocked()
}

func (r *resourceChecker) noteLocked(obj client.Object) {
	vr, ok := obj.(*vidrav1alpha1.VidraResource)
	if !ok || !vr.DeletionTimestamp.IsZero() {
		return
	}
	if key := resourceKey(vr); key != "" {
		r.live[vr.Name] = key
	}
}

func (r *resourceChecker) checkLocked() {
	byKey := map[string][]string{}
	for name, key := range r.live {
		byKey[key] = append(byKey[key], name)
	}
	for key, names := range byKey {
		if len(names) > 1 && !r.reported[key] {
			r.reported[key] = true
			r.found.found(duplicateVidraResource, "%s: %v", key, slices.Sorted(slices.Values(names)))
		}
	}
	// Once one again, a later duplicate of the key is another violation.
	for key := range r.reported {
		if len(byKey[key]) <= 1 {
			delete(r.reported, key)
		}
	}
}

// checkers are the phase's watchers.
type checkers struct {
	wg        sync.WaitGroup
	objects   []*objectChecker
	resources *resourceChecker
}

// followed are the objects the checkers see now, over every cluster, and the
// VidraResources: how much they guard.
func (c *checkers) followed() (objects, resources int) {
	for _, oc := range c.objects {
		oc.mu.Lock()
		objects += len(oc.present)
		oc.mu.Unlock()
	}
	c.resources.mu.Lock()
	defer c.resources.mu.Unlock()
	return objects, len(c.resources.live)
}

// startCheckers follows every cluster's objects and the hub's VidraResources until ctx
// ends; wg.Wait returns once they have stopped.
func (f *faultsRun) startCheckers(ctx context.Context) (*checkers, error) {
	cs := &checkers{resources: newResourceChecker(f.found)}
	for _, c := range f.clusters {
		cw, err := client.NewWithWatch(c.member.Config, client.Options{Scheme: c.member.Client.Scheme()})
		if err != nil {
			return nil, err
		}
		oc := newObjectChecker(c.name, f.found)
		cs.objects = append(cs.objects, oc)
		cs.wg.Go(func() {
			listWatch(ctx, cw, func() client.ObjectList { return &corev1.ConfigMapList{} }, oc.options(), oc.listed, oc.event)
		})
	}
	hub, err := client.NewWithWatch(f.fleet.Hub.Config, client.Options{Scheme: f.fleet.Hub.Client.Scheme()})
	if err != nil {
		return nil, err
	}
	cs.wg.Go(func() {
		listWatch(ctx, hub, func() client.ObjectList { return &vidrav1alpha1.VidraResourceList{} }, nil, cs.resources.listed, cs.resources.event)
	})
	return cs, nil
}
