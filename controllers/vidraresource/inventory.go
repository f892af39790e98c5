package vidraresource

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/runtime/hubobject"
)

// sizeInventory maps the bundle's objects to what the VidraResource will own, and stalls
// a bundle whose inventory the hub could not record: recorded before anything is applied,
// it would stop every reconcile at its first write. Until what left the bundle is
// released, the inventory names it too. A bundle adding nothing to what is recorded
// already fits, as it did before: a resync is not sized.
func (r *Reconciler) sizeInventory(_ context.Context, d *delivery) *outcome {
	d.desired, d.mapErrs = refsOf(d.engine, d.objects)
	added := inventory.Difference(d.desired, d.previous)
	if len(added) == 0 {
		return nil
	}
	tooLarge := inventoryTooLarge(d.vr, d.desired, inventory.Union(d.previous, added))
	if tooLarge == "" {
		return nil
	}
	markStalled(d.vr, vidrav1alpha1.ReasonInventoryTooLarge, tooLarge)
	r.event(d.vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonInventoryTooLarge, tooLarge)
	return stop(ctrl.Result{}, nil) // terminal until the spec changes
}

// refsOf maps every object of the bundle to the reference it will be applied as. A custom
// resource whose kind is not served yet, but whose CRD is in the bundle, takes its scope
// from that CRD: it is in the inventory before it is applied, as every object is.
func refsOf(engine *apply.Engine, objects []*unstructured.Unstructured) ([]inventory.Ref, []error) {
	refs := make([]inventory.Ref, 0, len(objects))
	var errs []error
	for _, o := range objects {
		ref, err := engine.Ref(o)
		if err != nil {
			scope, ok := scopeInBundle(o, objects)
			if !ok {
				errs = append(errs, &unplacedError{object: o, err: err})
				continue
			}
			ref = inventory.Ref{GVK: o.GroupVersionKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
			switch {
			case scope != "Namespaced":
				ref.Namespace = ""
			case ref.Namespace == "":
				ref.Namespace = engine.DefaultNamespace
			}
		}
		refs = append(refs, ref)
	}
	return inventory.Sort(refs), errs
}

// unplacedError is an object of the bundle that cannot be placed yet: its kind is not
// served and no CRD of the bundle declares it (or it names no namespace and the
// destination gives none). It reads as the mapping error.
type unplacedError struct {
	object *unstructured.Unstructured
	err    error
}

func (e *unplacedError) Error() string { return e.err.Error() }
func (e *unplacedError) Unwrap() error { return e.err }

// scopeInBundle is the scope (Namespaced or Cluster) that the bundle's CRD of o's kind
// gives it, if the bundle declares that CRD.
func scopeInBundle(o *unstructured.Unstructured, objects []*unstructured.Unstructured) (string, bool) {
	gvk := o.GroupVersionKind()
	for _, c := range objects {
		if c.GetKind() != "CustomResourceDefinition" || c.GroupVersionKind().Group != "apiextensions.k8s.io" {
			continue
		}
		group, _, _ := unstructured.NestedString(c.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "names", "kind")
		if group == gvk.Group && kind == gvk.Kind {
			scope, _, _ := unstructured.NestedString(c.Object, "spec", "scope")
			return scope, true
		}
	}
	return "", false
}

func setInventory(vr *vidrav1alpha1.VidraResource, refs []inventory.Ref) {
	managed := inventory.Entries(refs)
	vr.Status.ManagedResources = managed
	vr.Status.ResourceCount = int32(len(managed))
}

// recordLimit is how much of it a VidraResource's manifest and inventory may take: the
// rest is for its metadata, managed fields, conditions and preview.
const recordLimit = hubobject.Limit - 128<<10

// entryOverhead is an inventory entry's JSON beyond its values, its health included, and
// a message of messageAllowance bytes (why the object is not Current, such as "Replicas:
// 1/3").
var entryOverhead = len(`{"kind":"","apiVersion":"","name":"","namespace":"","status":"InProgress","message":""},`) + messageAllowance

// An entry's message is cut to maxEntryMessage bytes. The inventory's messages together
// take at most messageAllowance bytes per entry, and messageReserve more, out of the room
// recordLimit leaves: a longer one is left out.
const (
	maxEntryMessage  = 256
	messageAllowance = 32
	messageReserve   = 32 << 10
)

// inventoryTooLarge says why the VidraResource cannot record tracked, the objects of its
// bundle (desired) and those it still tracks until they are released, or "" when it can.
// Recorded before anything is applied, in the status and in the revision, an inventory
// that does not fit would stop every reconcile at its first write: the bundle must be
// split instead.
func inventoryTooLarge(vr *vidrav1alpha1.VidraResource, desired, tracked []inventory.Ref) string {
	size := len(vr.Spec.Manifest)
	for _, r := range tracked {
		size += entryOverhead + len(r.GVK.Kind) + len(r.GVK.GroupVersion().String()) + len(r.Name) + len(r.Namespace)
	}
	if size <= recordLimit {
		return ""
	}
	objects := fmt.Sprintf("%d objects", len(desired))
	if len(tracked) > len(desired) {
		objects += fmt.Sprintf(" (%d with those it replaces, tracked until they are released)", len(tracked))
	}
	return fmt.Sprintf("the bundle has %s: with their inventory the VidraResource would hold %d KiB, more than the %d KiB it may record under the hub's object size limit (etcd's, %d KiB); split the bundle into several VidraResources",
		objects, size>>10, recordLimit>>10, hubobject.Limit>>10)
}

// recordInventory writes the inventory to status at once, ahead of the apply.
func (r *Reconciler) recordInventory(ctx context.Context, vr *vidrav1alpha1.VidraResource, refs []inventory.Ref) error {
	if slices.Equal(refs, inventory.FromEntries(vr.Status.ManagedResources)) {
		return nil
	}
	// Patch a copy: the response would overwrite the status being built in vr.
	// Optimistic: the inventory is written whole, so it must not be built on a stale read.
	recorded := vr.DeepCopy()
	setInventory(recorded, refs)
	if err := r.Hub.Status().Patch(ctx, recorded, client.MergeFromWithOptions(vr, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("record inventory: %w", err)
	}
	setInventory(vr, refs)
	vr.ResourceVersion = recorded.ResourceVersion // our own write: the status patch builds on it
	r.wrote(vr)
	return nil
}
