package apply_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// TestUnchangedObjectsAreNotAppliedAgain: an object this owner's last apply left as the
// watch cache still sees it, declared the same, costs no request; one changed since, or
// declared differently, is applied.
func TestUnchangedObjectsAreNotAppliedAgain(t *testing.T) {
	var r requests
	e := countingEngine(t, "hub/steady", &r)
	e.Memo = &apply.Memo{}
	e.Current = currentOnTheServer
	applyOK(t, e, configMaps("steady", 3))
	before := r.total.Load()
	for _, res := range applyOK(t, e, configMaps("steady", 3)) {
		if res.Action != apply.Unchanged {
			t.Errorf("%s: %s, want Unchanged", res.Ref, res.Action)
		}
	}
	if got := r.total.Load() - before; got != 0 {
		t.Errorf("%d requests to apply 3 unchanged objects again, want 0", got)
	}

	// Someone changes one: it is applied again, and set back.
	cm, _ := configMap(t, "steady-1")
	cm.Data["k"] = "changed by hand"
	if err := member.Client.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	before = r.total.Load()
	applyOK(t, e, configMaps("steady", 3))
	if got := r.total.Load() - before; got == 0 {
		t.Error("an object changed by hand was not applied again")
	}
	if cm, _ := configMap(t, "steady-1"); cm.Data["k"] != "v" {
		t.Errorf("steady-1 = %q, want it set back", cm.Data["k"])
	}
}

// currentOnTheServer is an Engine's Current from the API server itself: as fresh as a
// watch cache can be.
func currentOnTheServer(ref inventory.Ref) (string, bool) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(ref.GVK)
	if err := member.Client.Get(context.Background(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, m); err != nil {
		return "", false
	}
	return m.ResourceVersion, true
}

// TestEstablishedCRDIsNotAppliedAgain: the API server writes a new CRD's status as it
// establishes it; the owner's next apply does not apply the CRD again for that (a large
// schema takes seconds), and a change to the CRD by anyone else is still set back.
func TestEstablishedCRDIsNotAppliedAgain(t *testing.T) {
	var r requests
	e := countingEngine(t, "hub/gadgets", &r)
	e.Memo = &apply.Memo{}
	e.Current = currentOnTheServer
	crd := strings.NewReplacer("widgets.example.com", "gadgets.example.com\n  annotations: {note: ours}",
		"widgets", "gadgets", "Widget", "Gadget", "widget", "gadget").Replace(widgetCRD)
	if got := applyOK(t, e, crd)[0].Action; got != apply.Created {
		t.Fatalf("first apply: %s, want Created", got)
	}
	before := r.total.Load()
	if got := applyOK(t, e, crd)[0]; got.Action != apply.Unchanged || got.Object != nil {
		t.Errorf("apply again: %s (applied: %t), want Unchanged without an apply", got.Action, got.Object != nil)
	}
	// The wait for the CRD to be established reads it once.
	if got := r.total.Load() - before; got != 1 {
		t.Errorf("%d requests to apply an established CRD again, want 1 (the wait's read)", got)
	}

	// Someone else changes what the owner declares: it is applied again, and set back.
	live := &apiextensionsv1.CustomResourceDefinition{}
	ctx := context.Background()
	if err := member.Client.Get(ctx, client.ObjectKey{Name: "gadgets.example.com"}, live); err != nil {
		t.Fatal(err)
	}
	live.Annotations["note"] = "theirs"
	if err := member.Client.Update(ctx, live, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	if got := applyOK(t, e, crd)[0].Action; got != apply.Repaired {
		t.Errorf("apply after a change by hand: %s, want Repaired", got)
	}
	if err := member.Client.Get(ctx, client.ObjectKey{Name: "gadgets.example.com"}, live); err != nil {
		t.Fatal(err)
	}
	if got := live.Annotations["note"]; got != "ours" {
		t.Errorf("annotation note = %q, want it set back", got)
	}
}

// TestDestinationNamespaceIsJoinedWithoutFieldsOfItsOwners: a namespace its owners only
// join is created by the owners-set manager, carries no field manager per owner, keeps
// every owner in its set, and goes with the last one.
func TestDestinationNamespaceIsJoinedWithoutFieldsOfItsOwners(t *testing.T) {
	ctx := context.Background()
	const ns = "joined-only"
	bundle := "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n"
	joinOnly := func(ref inventory.Ref) bool { return ref.GVK.Kind == "Namespace" && ref.Name == ns }
	latches := &apply.Latches{}
	owners := []string{"hub/a", "hub/b", "hub/c"}
	for _, owner := range owners {
		e := engine(t, owner)
		e.JoinOnly, e.Latches = joinOnly, latches
		applyOK(t, e, bundle)
	}
	got := &corev1.Namespace{}
	if err := member.Client.Get(ctx, client.ObjectKey{Name: ns}, got); err != nil {
		t.Fatal(err)
	}
	set, err := ownership.Owners(got)
	if err != nil || len(set) != 3 {
		t.Errorf("owners = %v, %v; want the three", set, err)
	}
	for _, m := range got.ManagedFields {
		if m.Manager != ownership.FieldManager {
			t.Errorf("field manager %q on a namespace its owners only join", m.Manager)
		}
	}
	for i, owner := range owners {
		if _, err := engine(t, owner).Release(ctx, refsOf(got), true); err != nil {
			t.Fatal(err)
		}
		// No namespace controller runs here: a deleted namespace stays, Terminating.
		left := &corev1.Namespace{}
		err := member.Client.Get(ctx, client.ObjectKey{Name: ns}, left)
		deleted := err != nil || !left.DeletionTimestamp.IsZero()
		if last := i == len(owners)-1; last != deleted {
			t.Errorf("after %s left: deleted %v, want %v", owner, deleted, last)
		}
	}
}

func refsOf(ns *corev1.Namespace) []inventory.Ref {
	return []inventory.Ref{{GVK: corev1.SchemeGroupVersion.WithKind("Namespace"), Name: ns.Name}}
}

// TestOwnersJoiningTogetherAreAllInTheSet: owners of one process joining a namespace at
// the same moment are joined in batches, and none is left out.
func TestOwnersJoiningTogetherAreAllInTheSet(t *testing.T) {
	const ns = "joined-together"
	bundle := "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n"
	joinOnly := func(ref inventory.Ref) bool { return ref.GVK.Kind == "Namespace" && ref.Name == ns }
	latches := &apply.Latches{}
	var r requests
	var wg sync.WaitGroup
	const n = 8
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := countingEngine(t, fmt.Sprintf("hub/together-%d", i), &r)
			e.JoinOnly, e.Latches = joinOnly, latches
			if _, err := e.Apply(context.Background(), decode(t, bundle)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := &corev1.Namespace{}
	if err := member.Client.Get(context.Background(), client.ObjectKey{Name: ns}, got); err != nil {
		t.Fatal(err)
	}
	set, err := ownership.Owners(got)
	if err != nil || len(set) != n {
		t.Errorf("owners = %v, %v; want all %d", set, err, n)
	}
	t.Logf("%d owners joined in %d requests", n, r.total.Load())
}

// TestJoinOnlyNamespaceNotVidrasIsUsedAsItIs: a namespace the owner only joins, which
// exists and Vidra does not manage, is left untouched without an error, and the rest of
// the bundle is applied into it in the same apply.
func TestJoinOnlyNamespaceNotVidrasIsUsedAsItIs(t *testing.T) {
	ctx := context.Background()
	const ns = "someone-elses"
	if err := member.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	e := engine(t, "hub/guest")
	e.JoinOnly = func(ref inventory.Ref) bool { return ref.GVK.Kind == "Namespace" && ref.Name == ns }
	results := applyOK(t, e, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n---\n"+
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: guest, namespace: "+ns+"}\ndata: {k: v}\n")
	if len(results) != 2 || results[0].Action != apply.UsedAsItIs || results[1].Action != apply.Created {
		t.Fatalf("results = %+v, want the namespace used as it is and the ConfigMap created", results)
	}
	got := &corev1.Namespace{}
	if err := member.Client.Get(ctx, client.ObjectKey{Name: ns}, got); err != nil {
		t.Fatal(err)
	}
	if ownership.IsManaged(got) || got.Annotations[vidrav1alpha1.OwnersAnnotation] != "" {
		t.Errorf("the namespace was marked: %v %v", got.Labels, got.Annotations)
	}
}
