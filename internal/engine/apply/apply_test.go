package apply_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/manifest"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// engine returns an apply engine for owner on the member, with a client that maps kinds
// through the member's own discovery (a CRD that exists only there must work).
func engine(t *testing.T, owner string) *apply.Engine {
	t.Helper()
	c, err := client.New(member.Config, client.Options{Scheme: member.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &apply.Engine{Client: c, Owner: owner, DefaultNamespace: "default"}
}

func decode(t *testing.T, yaml string) []*unstructured.Unstructured {
	t.Helper()
	objects, err := manifest.Decode([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

func applyOK(t *testing.T, e *apply.Engine, yaml string) []apply.Result {
	t.Helper()
	results, err := e.Apply(context.Background(), decode(t, yaml))
	if err != nil {
		t.Fatalf("apply as %s: %v", e.Owner, err)
	}
	return results
}

func configMap(t *testing.T, name string) (*corev1.ConfigMap, bool) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := member.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm, true
}

func owners(t *testing.T, obj client.Object) []string {
	t.Helper()
	o, err := ownership.Owners(obj)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func cmRef(name string) inventory.Ref {
	return inventory.Ref{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: "default", Name: name}
}

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

// TestCRDAndItsResourcesApplyInOneBundle: the custom resource comes first in the bundle,
// its CRD exists only on the member, and a namespaced object names no namespace.
func TestCRDAndItsResourcesApplyInOneBundle(t *testing.T) {
	e := engine(t, "hub/widgets")
	e.DefaultNamespace = "apps"
	results := applyOK(t, e, `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3}
---
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---`+widgetCRD)
	var order []string
	for _, r := range results {
		order = append(order, string(r.Action)+" "+r.Ref.String())
	}
	want := []string{"Created CustomResourceDefinition widgets.example.com", "Created Namespace apps", "Created Widget apps/w1"}
	if !slices.Equal(order, want) {
		t.Fatalf("results = %q, want %q", order, want)
	}
	// The CRD's result is the CRD as the wait saw it established, so that the health
	// check judges it ready without a poll.
	if conditions, _, _ := unstructured.NestedSlice(results[0].Object.Object, "status", "conditions"); !slices.ContainsFunc(conditions, func(c any) bool {
		condition, _ := c.(map[string]any)
		return condition["type"] == "Established" && condition["status"] == "True"
	}) {
		t.Errorf("the CRD's result is not established: conditions %v", conditions)
	}
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.com/v1")
	w.SetKind("Widget")
	if err := member.Client.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: "w1"}, w); err != nil {
		t.Fatal(err)
	}
	if !ownership.IsManaged(w) || !slices.Equal(owners(t, w), []string{"hub/widgets"}) {
		t.Errorf("widget labels %v annotations %v", w.GetLabels(), w.GetAnnotations())
	}
	// Applying again changes nothing.
	for _, r := range applyOK(t, e, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3}}`) {
		if r.Action != apply.Unchanged {
			t.Errorf("second apply: %s %s", r.Action, r.Ref)
		}
	}
}

func TestSharedObjectKeepsTheRemainingOwnersFields(t *testing.T) {
	ctx := context.Background()
	a, b := engine(t, "hub/a"), engine(t, "hub/b")
	applyOK(t, a, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {common: x, onlyA: '1'}\n")
	applyOK(t, b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {common: x, onlyB: '2'}\n")
	cm, _ := configMap(t, "shared")
	if !slices.Equal(owners(t, cm), []string{"hub/a", "hub/b"}) || len(cm.Data) != 3 {
		t.Fatalf("owners %v data %v", owners(t, cm), cm.Data)
	}

	if _, err := a.Release(ctx, []inventory.Ref{cmRef("shared")}, true); err != nil {
		t.Fatal(err)
	}
	cm, ok := configMap(t, "shared")
	if !ok {
		t.Fatal("a shared object was deleted while an owner still declares it")
	}
	if want := map[string]string{"common": "x", "onlyB": "2"}; !equalMaps(cm.Data, want) {
		t.Errorf("data = %v after hub/a left, want %v (only what hub/b declares)", cm.Data, want)
	}
	if !slices.Equal(owners(t, cm), []string{"hub/b"}) {
		t.Errorf("owners = %v", owners(t, cm))
	}

	results, err := b.Release(ctx, []inventory.Ref{cmRef("shared")}, true)
	if err != nil || results[0].Action != apply.Deleted {
		t.Fatalf("last release = %+v, %v", results, err)
	}
	if _, ok := configMap(t, "shared"); ok {
		t.Error("the object outlived its last owner")
	}
}

func TestConflictingSharedFieldIsReportedAndNeverFlipFlops(t *testing.T) {
	a, b := engine(t, "hub/red"), engine(t, "hub/blue")
	red := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: paint}\ndata: {color: red}\n"
	blue := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: paint}\ndata: {color: blue}\n"
	applyOK(t, a, red)
	for range 3 {
		results := applyOK(t, b, blue)
		r := results[0]
		if r.Action != apply.Conflicted || len(r.Conflicts) != 1 || r.Conflicts[0].Field != ".data.color" || r.Conflicts[0].Manager != a.FieldManager() {
			t.Fatalf("hub/blue's apply = %+v, want a conflict on .data.color with %s", r, a.FieldManager())
		}
		if got := applyOK(t, a, red)[0].Action; got != apply.Unchanged {
			t.Errorf("hub/red's apply = %s, want Unchanged", got)
		}
		if cm, _ := configMap(t, "paint"); cm.Data["color"] != "red" {
			t.Fatalf("color = %s: the object flip-flopped", cm.Data["color"])
		}
	}
	cm, _ := configMap(t, "paint")
	if !slices.Equal(owners(t, cm), []string{"hub/blue", "hub/red"}) {
		t.Errorf("owners = %v: a conflicting owner still owns the object", owners(t, cm))
	}
}

func TestDriftByAnotherManagerIsRepaired(t *testing.T) {
	ctx := context.Background()
	e := engine(t, "hub/drift")
	desired := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: drifting}\ndata: {k: desired}\n"
	applyOK(t, e, desired)
	cm, _ := configMap(t, "drifting")
	cm.Data["k"] = "changed by hand"
	if err := member.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	if got := applyOK(t, e, desired)[0]; got.Action != apply.Repaired {
		t.Errorf("apply after drift = %+v, want Repaired", got)
	}
	if cm, _ := configMap(t, "drifting"); cm.Data["k"] != "desired" {
		t.Errorf("k = %q, want the declared value back", cm.Data["k"])
	}
}

func TestUnmanagedObjectIsLeftAloneUnlessAdopted(t *testing.T) {
	ctx := context.Background()
	existing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "default"}, Data: map[string]string{"k": "theirs"}}
	if err := member.Client.Create(ctx, existing); err != nil {
		t.Fatal(err)
	}
	e := engine(t, "hub/adopter")
	results, err := e.Apply(ctx, decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs}\ndata: {k: ours}\n"))
	if err == nil || results[0].Action != apply.NotManaged || !strings.Contains(err.Error(), "adoptExisting") {
		t.Fatalf("apply = %+v, %v; want NotManaged", results, err)
	}
	if cm, _ := configMap(t, "theirs"); cm.Data["k"] != "theirs" || ownership.IsManaged(cm) {
		t.Fatalf("an unmanaged object was changed: %v %v", cm.Data, cm.Labels)
	}
	e.Adopt = true
	applyOK(t, e, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs}\ndata: {k: ours}\n")
	if cm, _ := configMap(t, "theirs"); cm.Data["k"] != "ours" || !slices.Equal(owners(t, cm), []string{"hub/adopter"}) {
		t.Errorf("adopted object: data %v owners %v", cm.Data, owners(t, cm))
	}
}

func TestUnknownKindIsNamed(t *testing.T) {
	results, err := engine(t, "hub/gizmo").Apply(context.Background(), decode(t, "apiVersion: example.com/v9\nkind: Gizmo\nmetadata: {name: g}\n"))
	if err == nil || results[0].Action != apply.Failed || !strings.Contains(err.Error(), "Gizmo") || !strings.Contains(err.Error(), "not served") {
		t.Errorf("apply = %+v, %v; want a failure naming the kind", results, err)
	}
}

func TestPruneFalseLeavesTheObjectUnmanaged(t *testing.T) {
	ctx := context.Background()
	e := engine(t, "hub/keeper")
	applyOK(t, e, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kept}\ndata: {k: v}\n")
	results, err := e.Release(ctx, []inventory.Ref{cmRef("kept")}, false)
	if err != nil || results[0].Action != apply.Released {
		t.Fatalf("release = %+v, %v", results, err)
	}
	cm, ok := configMap(t, "kept")
	if !ok || ownership.IsManaged(cm) || cm.Annotations[vidrav1alpha1.OwnersAnnotation] != "" {
		t.Errorf("kept object: exists %v labels %v", ok, cm)
	}
}

// An object its bundle marks prune: disabled is left on the cluster, unmanaged, when its
// last owner lets go of it, though the owner prunes.
func TestObjectWithPruneDisabledIsKeptWhenReleased(t *testing.T) {
	ctx := context.Background()
	e := engine(t, "hub/crds")
	applyOK(t, e, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: never-pruned, annotations: {vidra.infrahub.operators.com/prune: disabled}}\ndata: {k: v}\n")
	results, err := e.Release(ctx, []inventory.Ref{cmRef("never-pruned")}, true)
	if err != nil || results[0].Action != apply.Released {
		t.Fatalf("release = %+v, %v; want Released", results, err)
	}
	cm, ok := configMap(t, "never-pruned")
	if !ok || ownership.IsManaged(cm) || cm.Annotations[vidrav1alpha1.OwnersAnnotation] != "" {
		t.Errorf("kept object: exists %v, %v", ok, cm)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestApplyPhasesOrderTheStages: objects marked to come first are applied before the
// others, whatever their kind, and those marked to come last after them; a failure in a
// stage stops the later ones.
func TestApplyPhasesOrderTheStages(t *testing.T) {
	e := engine(t, "hub/phases")
	results := applyOK(t, e, `
apiVersion: v1
kind: ConfigMap
metadata: {name: phase-post, annotations: {vidra.infrahub.operators.com/apply-phase: post}}
---
apiVersion: v1
kind: Secret
metadata: {name: phase-main}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: phase-pre, annotations: {vidra.infrahub.operators.com/apply-phase: pre}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: phase-main}
`)
	var order []string
	for _, r := range results {
		order = append(order, r.Ref.String())
	}
	// By kind alone, the ServiceAccount would come after the ConfigMaps and the Secret.
	want := []string{"ServiceAccount default/phase-pre", "ConfigMap default/phase-main", "Secret default/phase-main", "ConfigMap default/phase-post"}
	if !slices.Equal(order, want) {
		t.Fatalf("apply order = %q, want %q", order, want)
	}

	// A pre object the API server refuses: nothing after it is applied.
	_, err := e.Apply(context.Background(), decode(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: phase-bad, annotations: {vidra.infrahub.operators.com/apply-phase: pre}}
data: {bad: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: phase-after-bad}
`))
	if err == nil {
		t.Fatal("a ConfigMap with a number in data applied")
	}
	if _, ok := configMap(t, "phase-after-bad"); ok {
		t.Error("the stage after a failed pre stage was applied")
	}
}
