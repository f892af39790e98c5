package apply_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// requests counts an engine's requests to the member, and the conflicts among them.
type requests struct{ total, conflicts atomic.Int64 }

func (r *requests) count(err error) error {
	r.total.Add(1)
	if apierrors.IsConflict(err) {
		r.conflicts.Add(1)
	}
	return err
}

// countingEngine is engine with a client that counts what it asks the member.
func countingEngine(t *testing.T, owner string, r *requests) *apply.Engine {
	t.Helper()
	base, err := client.NewWithWatch(member.Config, client.Options{Scheme: member.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return r.count(c.Get(ctx, key, obj, opts...))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return r.count(c.Patch(ctx, obj, patch, opts...))
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return r.count(c.Apply(ctx, obj, opts...))
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return r.count(c.Delete(ctx, obj, opts...))
		},
	})
	return &apply.Engine{Client: c, Owner: owner, DefaultNamespace: "default"}
}

func configMaps(prefix string, n int) string {
	var yaml string
	for i := range n {
		yaml += fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-%d}\ndata: {k: v}\n", prefix, i)
	}
	return yaml
}

func neverApplied(inventory.Ref) bool { return false }

// TestNewObjectsTakeOneRequestEach: objects the owner never applied are created, owned,
// with one request each, and judged from what the apply returned.
func TestNewObjectsTakeOneRequestEach(t *testing.T) {
	var r requests
	e := countingEngine(t, "hub/fresh", &r)
	e.Applied = neverApplied
	results := applyOK(t, e, configMaps("fresh", 5))
	if got := r.total.Load(); got != 5 {
		t.Errorf("%d requests for 5 new objects, want 5", got)
	}
	for i, res := range results {
		cm, _ := configMap(t, fmt.Sprintf("fresh-%d", i))
		if res.Action != apply.Created || res.Object == nil || res.Object.GetResourceVersion() != cm.ResourceVersion {
			t.Errorf("result %d = %s, object %v", i, res.Action, res.Object != nil)
		}
		if !ownership.IsManaged(cm) || !slices.Equal(owners(t, cm), []string{"hub/fresh"}) {
			t.Errorf("%s: labels %v annotations %v", cm.Name, cm.Labels, cm.Annotations)
		}
	}

	// Applied again, as part of the inventory: a read and an apply each, nothing changed.
	r.total.Store(0)
	e.Applied = func(inventory.Ref) bool { return true }
	for _, res := range applyOK(t, e, configMaps("fresh", 5)) {
		if res.Action != apply.Unchanged {
			t.Errorf("second apply of %s: %s", res.Ref, res.Action)
		}
	}
	if got := r.total.Load(); got != 10 {
		t.Errorf("%d requests to apply 5 unchanged objects again, want 10", got)
	}
	if cm, _ := configMap(t, "fresh-0"); !slices.Equal(owners(t, cm), []string{"hub/fresh"}) {
		t.Errorf("owners = %v after applying again", owners(t, cm))
	}
}

// TestObjectBelievedNewIsNeverTakenOver: an object the owner never applied that exists
// all the same, unmanaged, is left untouched; one that another owner manages is joined.
func TestObjectBelievedNewIsNeverTakenOver(t *testing.T) {
	ctx := context.Background()
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "believed-new", Namespace: "default"}, Data: map[string]string{"k": "theirs"}}
	if err := member.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	e := engine(t, "hub/believer")
	e.Applied = neverApplied
	results, err := e.Apply(ctx, decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: believed-new}\ndata: {k: ours}\n"))
	if err == nil || results[0].Action != apply.NotManaged {
		t.Fatalf("apply = %+v, %v; want NotManaged", results, err)
	}
	if cm, _ := configMap(t, "believed-new"); cm.Data["k"] != "theirs" || ownership.IsManaged(cm) {
		t.Fatalf("an unmanaged object was changed: %v %v", cm.Data, cm.Labels)
	}

	applyOK(t, engine(t, "hub/first"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared-new}\ndata: {k: v}\n")
	results = applyOK(t, e, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared-new}\ndata: {k: v}\n")
	cm, _ := configMap(t, "shared-new")
	if results[0].Action == apply.Created || !slices.Equal(owners(t, cm), []string{"hub/believer", "hub/first"}) {
		t.Errorf("join of an object believed new = %s, owners %v", results[0].Action, owners(t, cm))
	}
}

// TestOwnersOfOneProcessTakeTurnsAtASharedObject: engines sharing Latches apply the same
// namespace at once; while one holds it the others wait, and each joins it from what the
// previous one left, without reading it or failing a precondition.
func TestOwnersOfOneProcessTakeTurnsAtASharedObject(t *testing.T) {
	const n = 6
	ctx := context.Background()
	bundle := "apiVersion: v1\nkind: Namespace\nmetadata: {name: turns}\n"
	var latches apply.Latches
	var r requests
	engines := make([]*apply.Engine, n)
	for i := range n {
		engines[i] = countingEngine(t, fmt.Sprintf("hub/turn-%d", i), &r)
		engines[i].Applied = neverApplied
		engines[i].Latches = &latches
	}
	// The first holds the namespace until the others wait for their turn.
	holding, others := make(chan struct{}), make(chan struct{})
	first := engines[0].Client
	engines[0].Client = interceptor.NewClient(first.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			close(holding)
			<-others
			return c.Apply(ctx, obj, opts...)
		},
	})
	var wg sync.WaitGroup
	errs := make([]error, n)
	wg.Go(func() { _, errs[0] = engines[0].Apply(ctx, decode(t, bundle)) })
	<-holding
	for i := 1; i < n; i++ {
		wg.Go(func() { _, errs[i] = engines[i].Apply(ctx, decode(t, bundle)) })
	}
	time.Sleep(200 * time.Millisecond) // the others reach the latch
	close(others)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ns := &corev1.Namespace{}
	if err := member.Client.Get(ctx, client.ObjectKey{Name: "turns"}, ns); err != nil {
		t.Fatal(err)
	}
	if got := owners(t, ns); len(got) != n {
		t.Errorf("owners = %v, want all %d", got, n)
	}
	// The first creates; each other joins and applies.
	if c, total := r.conflicts.Load(), r.total.Load(); c != 0 || total != 1+2*(n-1) {
		t.Errorf("%d requests, %d conflicts; want %d and none", total, c, 1+2*(n-1))
	}
}

// TestRememberedObjectsAreAppliedWithoutARead: an owner applies again what its last
// apply left as it was in one request each; what changed meanwhile (drift, another owner
// joining) is read and applied as usual.
func TestRememberedObjectsAreAppliedWithoutARead(t *testing.T) {
	ctx := context.Background()
	var r requests
	e := countingEngine(t, "hub/memo", &r)
	e.Memo = &apply.Memo{}
	bundle := configMaps("memo", 3)
	applyOK(t, e, bundle)
	r.total.Store(0)
	for _, res := range applyOK(t, e, bundle) {
		if res.Action != apply.Unchanged || res.Object == nil {
			t.Errorf("apply again of %s = %s", res.Ref, res.Action)
		}
	}
	if got := r.total.Load(); got != 3 {
		t.Errorf("%d requests to apply 3 remembered objects again, want 3", got)
	}

	// Drift on one, another owner joining another: both are read, and set right.
	cm, _ := configMap(t, "memo-0")
	cm.Data["k"] = "changed by hand"
	if err := member.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	applyOK(t, engine(t, "hub/other"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: memo-1}\ndata: {k: v}\n")
	results := applyOK(t, e, bundle)
	if results[0].Action != apply.Repaired || results[1].Action != apply.Unchanged || results[2].Action != apply.Unchanged {
		t.Errorf("actions = %s %s %s, want Repaired Unchanged Unchanged", results[0].Action, results[1].Action, results[2].Action)
	}
	if cm, _ := configMap(t, "memo-0"); cm.Data["k"] != "v" {
		t.Errorf("drift not repaired: %v", cm.Data)
	}
	if cm, _ := configMap(t, "memo-1"); !slices.Equal(owners(t, cm), []string{"hub/memo", "hub/other"}) {
		t.Errorf("owners = %v after the remembered owner applied again", owners(t, cm))
	}

	// Released and applied again: created anew, not from memory.
	if _, err := e.Release(ctx, []inventory.Ref{cmRef("memo-2")}, true); err != nil {
		t.Fatal(err)
	}
	if got := applyOK(t, e, bundle)[2]; got.Action != apply.Created {
		t.Errorf("apply after release = %s, want Created", got.Action)
	}
}
