package fanout

import (
	"context"
	"errors"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// ownedResources are the VidraResources the sync made, by name.
func (d *Delivery) ownedResources(ctx context.Context) (map[string]*vidrav1alpha1.VidraResource, error) {
	list, err := Owned(ctx, d.cfg.Hub, d.sync.Object)
	if err != nil {
		return nil, err
	}
	owned := make(map[string]*vidrav1alpha1.VidraResource, len(list))
	for _, vr := range list {
		owned[vr.Name] = vr
	}
	return owned, nil
}

// Owned are the VidraResources sync made: labeled with its name and controlled by it.
// A VidraResource that only carries the label is not its own. opts are the list's
// (client.UnsafeDisableDeepCopy for one only read).
func Owned(ctx context.Context, hub client.Reader, sync vidrav1alpha1.Sync, opts ...client.ListOption) ([]*vidrav1alpha1.VidraResource, error) {
	name := sync.GetName()
	var list vidrav1alpha1.VidraResourceList
	if err := hub.List(ctx, &list, append(opts, client.MatchingLabels{sync.SyncKind().Label: name})...); err != nil {
		return nil, fmt.Errorf("list VidraResources of %s: %w", name, err)
	}
	owned := make([]*vidrav1alpha1.VidraResource, 0, len(list.Items))
	for i := range list.Items {
		if vr := &list.Items[i]; metav1.IsControlledBy(vr, sync) {
			owned = append(owned, vr)
		}
	}
	return owned, nil
}

// Prune deletes the VidraResources the sync made that no item keeps: those of items no
// longer listed, or of clusters no longer selected.
func (d *Delivery) Prune(ctx context.Context) error {
	var errs []error
	names := make([]string, 0, len(d.owned))
	for name := range d.owned {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if d.keep[name] {
			continue
		}
		vr := d.owned[name]
		// The UID precondition makes sure only this sync's VidraResource is deleted, even
		// if the name was reused since the cache saw it.
		err := d.cfg.Hub.Delete(ctx, vr, client.Preconditions{UID: &vr.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete VidraResource %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// observeWave counts a wave of a progressive rollout that ended.
func (d *Delivery) observeWave(result string) {
	if d.cfg.ObserveWave != nil {
		d.cfg.ObserveWave(result)
	}
}

// SyncOf is the sync ref names, read from hub (opts are the Get's); nil when there is
// none (the API server refuses a kind that is no kind of sync).
func SyncOf(ctx context.Context, hub client.Reader, ref vidrav1alpha1.SyncReference, opts ...client.GetOption) (vidrav1alpha1.Sync, error) {
	kind := vidrav1alpha1.LookupSyncKind(ref.Kind)
	if kind.New == nil {
		return nil, nil
	}
	sync := kind.New()
	if err := hub.Get(ctx, client.ObjectKey{Name: ref.Name}, sync, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get %s %s: %w", ref.Kind, ref.Name, err)
	}
	return sync, nil
}
