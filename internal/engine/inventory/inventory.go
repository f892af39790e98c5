// Package inventory names the objects a VidraResource owns on its cluster — what its
// status records, what a revision recorded, what its bundle declares — and does the set
// algebra over them: an object is one object whatever API version names it.
package inventory

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Ref names an object on a cluster.
type Ref struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

// Key identifies the object whatever API version names it: group, kind, namespace and
// name, for maps and sets.
func (r Ref) Key() string {
	return r.GVK.Group + "/" + r.GVK.Kind + "/" + r.Namespace + "/" + r.Name
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s", r.GVK.Kind, r.Name)
	}
	return fmt.Sprintf("%s %s/%s", r.GVK.Kind, r.Namespace, r.Name)
}

// Entry is the inventory entry naming the object (its identity, no health).
func (r Ref) Entry() vidrav1alpha1.ManagedResource {
	return vidrav1alpha1.ManagedResource{APIVersion: r.GVK.GroupVersion().String(), Kind: r.GVK.Kind, Namespace: r.Namespace, Name: r.Name}
}

// FromEntry is the object an inventory entry names; false when its apiVersion does not
// parse (the ref then has no group or version).
func FromEntry(m vidrav1alpha1.ManagedResource) (Ref, bool) {
	gv, err := schema.ParseGroupVersion(m.APIVersion)
	return Ref{GVK: gv.WithKind(m.Kind), Namespace: m.Namespace, Name: m.Name}, err == nil
}

// FromEntries is the objects the entries name, sorted, each once; an entry whose
// apiVersion does not parse names none.
func FromEntries(managed []vidrav1alpha1.ManagedResource) []Ref {
	refs := make([]Ref, 0, len(managed))
	for _, m := range managed {
		if ref, ok := FromEntry(m); ok {
			refs = append(refs, ref)
		}
	}
	return Sort(refs)
}

// Entries is the inventory entries naming refs, sorted, each once.
func Entries(refs []Ref) []vidrav1alpha1.ManagedResource {
	refs = Sort(refs)
	managed := make([]vidrav1alpha1.ManagedResource, 0, len(refs))
	for _, r := range refs {
		managed = append(managed, r.Entry())
	}
	return managed
}

// Sort is refs sorted by key, each object once. Each key is built once, not at every
// comparison: a reconcile sorts its bundle's refs more than once.
func Sort(refs []Ref) []Ref {
	if len(refs) == 0 {
		return slices.Clone(refs)
	}
	type keyed struct {
		key string
		ref Ref
	}
	byKey := make([]keyed, len(refs))
	for i, r := range refs {
		byKey[i] = keyed{r.Key(), r}
	}
	slices.SortFunc(byKey, func(a, b keyed) int { return cmp.Compare(a.key, b.key) })
	sorted := make([]Ref, 0, len(byKey))
	for i, k := range byKey {
		if i == 0 || k.key != byKey[i-1].key {
			sorted = append(sorted, k.ref)
		}
	}
	return sorted
}

// Union is the objects of a and b, sorted.
func Union(a, b []Ref) []Ref {
	return Sort(slices.Concat(a, b))
}

// Difference is what a names and b does not, in a's order.
func Difference(a, b []Ref) []Ref {
	in := NewSet(b)
	var out []Ref
	for _, r := range a {
		if !in.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// Covers says whether recorded names every object of desired.
func Covers(recorded, desired []Ref) bool {
	return NewSet(recorded).HasAll(desired)
}

// Kinds are the kinds of refs, each once, in the order they first appear.
func Kinds(refs []Ref) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	for _, r := range refs {
		if !slices.Contains(kinds, r.GVK) {
			kinds = append(kinds, r.GVK)
		}
	}
	return kinds
}

// Join names refs for people, separated by commas.
func Join(refs []Ref) string {
	s := make([]string, 0, len(refs))
	for _, r := range refs {
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}

// Set is a set of objects, by key: built once, asked many times.
type Set map[string]struct{}

// NewSet is the objects of the lists.
func NewSet(lists ...[]Ref) Set {
	s := Set{}
	for _, list := range lists {
		for _, r := range list {
			s.Add(r)
		}
	}
	return s
}

// Add adds the object to the set.
func (s Set) Add(r Ref) {
	s[r.Key()] = struct{}{}
}

// Has says whether the set names the object, whatever its version.
func (s Set) Has(r Ref) bool {
	_, ok := s[r.Key()]
	return ok
}

// HasAll says whether the set names every object of refs.
func (s Set) HasAll(refs []Ref) bool {
	for _, r := range refs {
		if !s.Has(r) {
			return false
		}
	}
	return true
}
