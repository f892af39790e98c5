package inventory_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

func ref(group, version, kind, ns, name string) inventory.Ref {
	return inventory.Ref{GVK: schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, Namespace: ns, Name: name}
}

func keys(refs []inventory.Ref) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.Key())
	}
	return out
}

func TestAnObjectIsOneObjectWhateverVersionNamesIt(t *testing.T) {
	v1 := ref("autoscaling", "v1", "HorizontalPodAutoscaler", "web", "api")
	v2 := ref("autoscaling", "v2", "HorizontalPodAutoscaler", "web", "api")
	if v1.Key() != v2.Key() {
		t.Fatalf("keys %q and %q differ", v1.Key(), v2.Key())
	}
	if got := inventory.Union([]inventory.Ref{v1}, []inventory.Ref{v2}); len(got) != 1 {
		t.Errorf("union of one object in two versions = %v", got)
	}
	if got := inventory.Difference([]inventory.Ref{v1}, []inventory.Ref{v2}); len(got) != 0 {
		t.Errorf("difference of one object in two versions = %v", got)
	}
	if !inventory.Covers([]inventory.Ref{v2}, []inventory.Ref{v1}) {
		t.Error("v2 does not cover the same object in v1")
	}
	if got, want := v1.String(), "HorizontalPodAutoscaler web/api"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestSetAlgebra(t *testing.T) {
	cm := ref("", "v1", "ConfigMap", "web", "a")
	ns := ref("", "v1", "Namespace", "", "web")
	deploy := ref("apps", "v1", "Deployment", "web", "api")
	union := inventory.Union([]inventory.Ref{deploy, cm}, []inventory.Ref{ns, cm})
	if got, want := keys(union), []string{"/ConfigMap/web/a", "/Namespace//web", "apps/Deployment/web/api"}; !slices.Equal(got, want) {
		t.Errorf("union = %v, want %v (sorted, each once)", got, want)
	}
	if got, want := keys(inventory.Difference([]inventory.Ref{deploy, cm, ns}, []inventory.Ref{cm})), []string{"apps/Deployment/web/api", "/Namespace//web"}; !slices.Equal(got, want) {
		t.Errorf("difference = %v, want %v (in the first list's order)", got, want)
	}
	if got := inventory.Sort(nil); got != nil {
		t.Errorf("sort of nothing = %#v, want nil (a status holding none stays unchanged)", got)
	}
	if inventory.Covers([]inventory.Ref{cm}, []inventory.Ref{cm, ns}) {
		t.Error("one object covers two")
	}
	if got := inventory.Kinds([]inventory.Ref{cm, deploy, cm}); len(got) != 2 || got[0].Kind != "ConfigMap" {
		t.Errorf("kinds = %v", got)
	}
}

func TestEntriesRoundTrip(t *testing.T) {
	refs := []inventory.Ref{ref("apps", "v1", "Deployment", "web", "api"), ref("", "v1", "Namespace", "", "web")}
	entries := inventory.Entries(refs)
	if entries[0].APIVersion != "v1" || entries[1].APIVersion != "apps/v1" {
		t.Errorf("entries = %+v, want sorted by object", entries)
	}
	back := inventory.FromEntries(append(entries, vidrav1alpha1.ManagedResource{APIVersion: "a/b/c", Kind: "Broken", Name: "x"}))
	if !slices.Equal(keys(back), keys(inventory.Sort(refs))) {
		t.Errorf("round trip = %v, want %v without the entry whose apiVersion does not parse", back, refs)
	}
}
