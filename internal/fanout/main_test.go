package fanout_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/runtime/events"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// hub is a real API server: the VidraResources a delivery writes are validated, owned
// and deleted with preconditions there.
var hub *testfleet.Cluster

// contentNamespace holds the content store's chunks.
const contentNamespace = "vidra-content"

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{}, func(f *testfleet.Fleet) { hub = f.Hub }))
}

// source is a Source of the test's own: bundles by item ID, a failure by item ID, and
// how often each was fetched.
type source struct {
	mu      sync.Mutex
	bundles map[string]string
	fail    map[string]error
	fetched map[string]int
}

func newSource(bundles map[string]string) *source {
	return &source{bundles: bundles, fail: map[string]error{}, fetched: map[string]int{}}
}

func (s *source) Fetch(_ context.Context, it fanout.Item) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetched[it.ID]++
	if err := s.fail[it.ID]; err != nil {
		return nil, err
	}
	b, ok := s.bundles[it.ID]
	if !ok {
		return nil, fmt.Errorf("no bundle %s", it.ID)
	}
	return []byte(b), nil
}

// set changes a bundle, or fails its fetches with err.
func (s *source) set(id, bundle string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bundles[id], s.fail[id] = bundle, err
}

// items lists every bundle of s in ids' order, each with the MD5 of its content, as a
// source's listing gives it.
func (s *source) items(ids ...string) []fanout.Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]fanout.Item, 0, len(ids))
	for _, id := range ids {
		out = append(out, fanout.Item{ID: id, Name: id, Checksum: content.MD5([]byte(s.bundles[id]))})
	}
	return out
}

func (s *source) fetches(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetched[id]
}

// configMap is a bundle of one ConfigMap whose data.value is value.
func configMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value)
}

// harness delivers one sync's items in rounds, as its controller's reconciles would,
// keeping the sync's status in memory between them.
type harness struct {
	t      *testing.T
	sync   *vidrav1alpha1.GitSync
	src    *source
	cfg    fanout.Config
	events *k8sevents.FakeRecorder
	now    time.Time
}

// newHarness creates the sync on the hub (it controls what is delivered) and removes
// it, with its VidraResources, when the test ends.
func newHarness(t *testing.T, name string, spec vidrav1alpha1.SyncOptions, src *source) *harness {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: contentNamespace}}
	if err := client.IgnoreAlreadyExists(hub.Client.Create(ctx, ns)); err != nil {
		t.Fatal(err)
	}
	gs := &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       vidrav1alpha1.GitSyncSpec{Source: vidrav1alpha1.GitSource{URL: "https://git.example/" + name}, SyncOptions: spec},
	}
	if err := hub.Client.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanUp(t, gs) })
	h := &harness{t: t, sync: gs, src: src, events: k8sevents.NewFakeRecorder(100), now: time.Now()}
	h.cfg = fanout.Config{
		Hub: hub.Client, HubReader: hub.Client, InlineLimit: 64 << 10,
		Content: &content.Store{Client: hub.Client, Reader: hub.Client, Namespace: contentNamespace},
		Events:  events.NewRecorder(h.events, "Deliver"),
		Now:     func() time.Time { return h.now },
	}
	return h
}

// cleanUp deletes the sync's VidraResources (their finalizer is the VidraResource
// controller's, which does not run here) and the sync.
func cleanUp(t *testing.T, gs *vidrav1alpha1.GitSync) {
	ctx := context.Background()
	for _, vr := range resourcesOf(t, gs) {
		vr.Finalizers = nil
		if err := hub.Client.Update(ctx, &vr); err != nil {
			t.Error(err)
		}
		if err := client.IgnoreNotFound(hub.Client.Delete(ctx, &vr)); err != nil {
			t.Error(err)
		}
	}
	if err := client.IgnoreNotFound(hub.Client.Delete(ctx, gs)); err != nil {
		t.Error(err)
	}
}

// round is one reconcile's delivery: the sync's items delivered to its destinations,
// what no item keeps pruned (unless told not to, as when its listing failed), and the
// statuses kept for the next round.
func (h *harness) round(items []fanout.Item) *fanout.Delivery {
	h.t.Helper()
	ctx := context.Background()
	d, targets := h.delivery()
	previous := map[string]vidrav1alpha1.BundleStatus{}
	for _, b := range h.sync.Status.Bundles {
		previous[b.ID] = b
	}
	statuses, st := d.Deliver(ctx, items, targets, previous)
	if err := d.Prune(ctx); err != nil {
		h.t.Fatal(err)
	}
	h.sync.Status.Bundles = statuses
	if st != nil {
		h.sync.Status.Rollout = st
	}
	return d
}

// delivery is one reconcile's delivery of the sync, and its destinations.
func (h *harness) delivery() (*fanout.Delivery, []fanout.Target) {
	h.t.Helper()
	ctx := context.Background()
	d, err := fanout.New(ctx, h.cfg, fanout.Sync{
		Object: h.sync, SourceName: "test", Noun: "bundle",
		Destination: fanout.Destination{
			Destination: h.sync.Spec.Destination.Destination, ClusterSelector: h.sync.Spec.Destination.ClusterSelector,
		},
		Template: h.sync.Spec.Template,
	}, h.src)
	if err != nil {
		h.t.Fatal(err)
	}
	targets, err := d.Destinations(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return d, targets
}

// resourcesOf are the VidraResources labeled with the sync's name, as the API server
// has them.
func resourcesOf(t *testing.T, gs *vidrav1alpha1.GitSync) []vidrav1alpha1.VidraResource {
	t.Helper()
	var list vidrav1alpha1.VidraResourceList
	if err := hub.Client.List(context.Background(), &list, client.MatchingLabels{gs.SyncKind().Label: gs.Name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// delivered maps "item/cluster" to the manifest its VidraResource holds (read from the
// content store when stored there); those being deleted deliver nothing.
func (h *harness) delivered() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	for _, vr := range resourcesOf(h.t, h.sync) {
		if vr.DeletionTimestamp != nil {
			continue
		}
		m := vr.Spec.Manifest
		if vr.Spec.Content != nil {
			data, err := h.cfg.Content.Get(context.Background(), vr.Spec.Content.Digest)
			if err != nil {
				h.t.Fatal(err)
			}
			m = string(data)
		}
		out[vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleIDAnnotation)+"/"+vr.Spec.Destination.Cluster] = m
	}
	return out
}

// enroll makes a VidraCluster with labels, as the cluster provider would.
func enroll(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	vc := &vidrav1alpha1.VidraCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := hub.Client.Create(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.IgnoreNotFound(hub.Client.Delete(context.Background(), vc)); err != nil {
			t.Error(err)
		}
	})
}

// report writes what the VidraResource controller would report of a VidraResource for
// its current spec: Ready, or not with why.
func report(t *testing.T, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	vr := &vidrav1alpha1.VidraResource{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: name}, vr); err != nil {
		t.Fatal(err)
	}
	cond := metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: vr.Generation, LastTransitionTime: metav1.Now()}
	if !ready {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Unhealthy", "Deployment web: not available"
	}
	vr.Status.ObservedGeneration = vr.Generation
	vr.Status.Conditions = []metav1.Condition{cond}
	if err := hub.Client.Status().Update(ctx, vr); err != nil {
		t.Fatal(err)
	}
}
