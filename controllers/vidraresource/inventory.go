package vidraresource

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/ownership"
)

// refsOf maps every object of the bundle to the reference it will be applied as. A custom
// resource whose kind is not served yet, but whose CRD is in the bundle, takes its scope
// from that CRD: it is in the inventory before it is applied, as every object is.
func refsOf(engine *apply.Engine, objects []*unstructured.Unstructured) ([]ownership.Ref, []error) {
	refs := make([]ownership.Ref, 0, len(objects))
	var errs []error
	for _, o := range objects {
		ref, err := engine.Ref(o)
		if err != nil {
			scope, ok := scopeInBundle(o, objects)
			if !ok {
				errs = append(errs, err)
				continue
			}
			ref = ownership.Ref{GVK: o.GroupVersionKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
			switch {
			case scope != "Namespaced":
				ref.Namespace = ""
			case ref.Namespace == "":
				ref.Namespace = engine.DefaultNamespace
			}
		}
		refs = append(refs, ref)
	}
	return sortRefs(refs), errs
}

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

func refsFromStatus(managed []vidrav1alpha1.ManagedResource) []ownership.Ref {
	refs := make([]ownership.Ref, 0, len(managed))
	for _, m := range managed {
		if ref, ok := ownership.EntryRef(m); ok {
			refs = append(refs, ref)
		}
	}
	return sortRefs(refs)
}

func setInventory(vr *vidrav1alpha1.VidraResource, refs []ownership.Ref) {
	managed := managedOf(refs)
	vr.Status.ManagedResources = managed
	vr.Status.ResourceCount = int32(len(managed))
}

// hubObjectLimit is the most an object on the hub may hold: etcd's default request limit
// (--max-request-bytes, 1.5 MiB), which managed control planes keep too.
const hubObjectLimit = 3 << 19

// recordLimit is how much of it a VidraResource's manifest and inventory may take: the
// rest is for its metadata, managed fields, conditions and preview.
const recordLimit = hubObjectLimit - 128<<10

// entryOverhead is an inventory entry's JSON beyond its values, its health included, and
// a message of messageAllowance bytes ("Resource is always ready", "Deployment is
// available. Replicas: 3").
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
func inventoryTooLarge(vr *vidrav1alpha1.VidraResource, desired, tracked []ownership.Ref) string {
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
		objects, size>>10, recordLimit>>10, hubObjectLimit>>10)
}

// managedOf is the inventory entries naming refs, sorted.
func managedOf(refs []ownership.Ref) []vidrav1alpha1.ManagedResource {
	refs = sortRefs(refs)
	managed := make([]vidrav1alpha1.ManagedResource, 0, len(refs))
	for _, r := range refs {
		managed = append(managed, vidrav1alpha1.ManagedResource{
			APIVersion: r.GVK.GroupVersion().String(), Kind: r.GVK.Kind, Namespace: r.Namespace, Name: r.Name,
		})
	}
	return managed
}

func sortRefs(refs []ownership.Ref) []ownership.Ref {
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b ownership.Ref) int { return cmp.Compare(a.Key(), b.Key()) })
	return slices.CompactFunc(refs, func(a, b ownership.Ref) bool { return a.Key() == b.Key() })
}

func union(a, b []ownership.Ref) []ownership.Ref {
	return sortRefs(append(slices.Clone(a), b...))
}

// difference is what a has and b has not.
func difference(a, b []ownership.Ref) []ownership.Ref {
	in := map[string]bool{}
	for _, r := range b {
		in[r.Key()] = true
	}
	var out []ownership.Ref
	for _, r := range a {
		if !in[r.Key()] {
			out = append(out, r)
		}
	}
	return out
}

func kindsOf(refs []ownership.Ref) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	for _, r := range refs {
		if !slices.Contains(kinds, r.GVK) {
			kinds = append(kinds, r.GVK)
		}
	}
	return kinds
}

func refsString(refs []ownership.Ref) string {
	s := make([]string, 0, len(refs))
	for _, r := range refs {
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}
