package vidraresource

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/ownership"
)

// refsOf maps every object of the bundle to the reference it will be applied as. Objects
// whose kind is not served yet (a CRD of the same bundle) are left out, with an error, and
// the bundle is applied again once the kind exists.
func refsOf(engine *apply.Engine, objects []*unstructured.Unstructured) ([]ownership.Ref, []error) {
	refs := make([]ownership.Ref, 0, len(objects))
	var errs []error
	for _, o := range objects {
		ref, err := engine.Ref(o)
		if err != nil {
			if isCRDOfBundle(o, objects) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		refs = append(refs, ref)
	}
	return sortRefs(refs), errs
}

// isCRDOfBundle says whether the bundle declares the CRD of o's kind.
func isCRDOfBundle(o *unstructured.Unstructured, objects []*unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	for _, c := range objects {
		if c.GetKind() != "CustomResourceDefinition" {
			continue
		}
		group, _, _ := unstructured.NestedString(c.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "names", "kind")
		if group == gvk.Group && kind == gvk.Kind {
			return true
		}
	}
	return false
}

func refsFromStatus(managed []vidrav1alpha1.ManagedResource) []ownership.Ref {
	refs := make([]ownership.Ref, 0, len(managed))
	for _, m := range managed {
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil {
			continue
		}
		refs = append(refs, ownership.Ref{GVK: gv.WithKind(m.Kind), Namespace: m.Namespace, Name: m.Name})
	}
	return sortRefs(refs)
}

func setInventory(vr *vidrav1alpha1.VidraResource, refs []ownership.Ref) {
	refs = sortRefs(refs)
	managed := make([]vidrav1alpha1.ManagedResource, 0, len(refs))
	for _, r := range refs {
		managed = append(managed, vidrav1alpha1.ManagedResource{
			APIVersion: r.GVK.GroupVersion().String(), Kind: r.GVK.Kind, Namespace: r.Namespace, Name: r.Name,
		})
	}
	vr.Status.ManagedResources = managed
	vr.Status.ResourceCount = int32(len(managed))
}

// key identifies an object whatever the version it is applied as.
func key(r ownership.Ref) string {
	return r.GVK.Group + "/" + r.GVK.Kind + "/" + r.Namespace + "/" + r.Name
}

func sortRefs(refs []ownership.Ref) []ownership.Ref {
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b ownership.Ref) int { return cmp.Compare(key(a), key(b)) })
	return slices.CompactFunc(refs, func(a, b ownership.Ref) bool { return key(a) == key(b) })
}

func union(a, b []ownership.Ref) []ownership.Ref {
	return sortRefs(append(slices.Clone(a), b...))
}

// difference is what a has and b has not.
func difference(a, b []ownership.Ref) []ownership.Ref {
	in := map[string]bool{}
	for _, r := range b {
		in[key(r)] = true
	}
	var out []ownership.Ref
	for _, r := range a {
		if !in[key(r)] {
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
