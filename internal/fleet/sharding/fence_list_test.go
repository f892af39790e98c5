package sharding_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/fleet/sharding"
)

// leaseRequests counts a client's requests on Leases, by verb.
type leaseRequests struct {
	mu sync.Mutex
	n  map[string]int
	// afterList, when set, runs once the first List has returned.
	afterList func()
}

func (r *leaseRequests) count(verb string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[verb]++
}

func (r *leaseRequests) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = map[string]int{}
	return n
}

func (r *leaseRequests) client(t *testing.T) client.Client {
	t.Helper()
	r.n = map[string]int{}
	return hubClientWith(t, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			r.count("get")
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			r.count("list")
			err := c.List(ctx, list, opts...)
			if r.afterList != nil {
				r.afterList()
				r.afterList = nil
			}
			return err
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			r.count("create")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			r.count("update")
			return c.Update(ctx, obj, opts...)
		},
	})
}

// TestManyFencesAreWrittenFromOneList: a replica taking more fences than it has writers
// (a peer gone, a third of the fleet to take over) lists them once and writes each with
// one request; a fence another replica wrote after the List is read again, and left to
// it when it holds it.
func TestManyFencesAreWrittenFromOneList(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	var names []multicluster.ClusterName
	for i := range 12 {
		names = append(names, multicluster.ClusterName(fmt.Sprintf("site-%02d", i)))
	}
	// site-00..03 held by a replica gone; site-04 and 05 held by a live one; the others
	// have never been fenced. site-00 is taken by the live one just after the List.
	for _, name := range names[:4] {
		expiredFence(t, ns, name)
	}
	for _, name := range names[4:6] {
		holdFence(t, ns, name, time.Minute)
	}
	requests := &leaseRequests{afterList: func() { takeOver(t, ns, names[0]) }}
	coord, err := sharding.New(requests.client(t), closed(), testLogger(t), sharding.Options{PeerID: "survivor", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}

	took, err := coord.TakeFencesAsOnePass(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		want := i != 0 && i != 4 && i != 5
		if took[name] != want {
			t.Errorf("took %s's fence: %v, want %v", name, took[name], want)
		}
		if holder, wantHolder := fenceHolder(t, ns, name), map[bool]string{true: "survivor", false: "ghost"}[want]; holder != wantHolder {
			t.Errorf("%s's fence is held by %q, want %q", name, holder, wantHolder)
		}
	}
	// One List; an update per fence that existed and a create per one that did not; the
	// fence written since the List: its update refused, one read, no write.
	if got, want := requests.take(), map[string]int{"list": 1, "update": 3 + 1, "create": 6, "get": 1}; !maps.Equal(got, want) {
		t.Errorf("Lease requests taking 12 fences: %v, want %v", got, want)
	}

	// Handing them all back: only the fences this replica holds are written, once each.
	if err := coord.ReleaseFencesAsOnePass(ctx, names); err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		want := map[bool]string{true: "", false: "ghost"}[i != 0 && i != 4 && i != 5]
		if holder := fenceHolder(t, ns, name); holder != want {
			t.Errorf("after the hand-back %s's fence is held by %q, want %q", name, holder, want)
		}
	}
	if got, want := requests.take(), map[string]int{"list": 1, "update": 9}; !maps.Equal(got, want) {
		t.Errorf("Lease requests handing back 12 fences: %v, want %v", got, want)
	}
}

// expiredFence makes a replica gone long ago hold a cluster's fence: it is free.
func expiredFence(t *testing.T, ns string, name multicluster.ClusterName) {
	t.Helper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharding.FenceName(name)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("ghost"),
			LeaseDurationSeconds: ptr.To(int32(15)),
			RenewTime:            &metav1.MicroTime{Time: time.Now().Add(-time.Hour)},
		},
	}
	if err := hub.Client.Create(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
}

// takeOver makes a live replica other than the one under test hold the cluster's fence.
func takeOver(t *testing.T, ns string, name multicluster.ClusterName) {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: sharding.FenceName(name)}, lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(60))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := hub.Client.Update(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
}
