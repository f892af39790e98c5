package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// selecting fans out to the clusters labeled with labels, into namespace web.
func selecting(labels map[string]string) vidrav1alpha1.SyncOptions {
	return vidrav1alpha1.SyncOptions{Destination: vidrav1alpha1.SyncDestination{
		Destination:     vidrav1alpha1.Destination{Namespace: "web"},
		ClusterSelector: &metav1.LabelSelector{MatchLabels: labels},
	}}
}

// versions maps "item/cluster" to the resourceVersion of its VidraResource: equal
// before and after a round when the round wrote nothing.
func versions(t *testing.T, gs *vidrav1alpha1.GitSync) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, vr := range resourcesOf(t, gs) {
		out[vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleIDAnnotation)+"/"+vr.Spec.Destination.Cluster] = vr.ResourceVersion
	}
	return out
}

// Each item goes to each selected cluster, fetched once whatever the number of clusters;
// an unchanged listing fetches and writes nothing; a changed item is fetched and
// rewritten alone; an item gone, or a cluster leaving the selection, is pruned; a
// VidraResource that only carries the sync's label is not the sync's to prune.
func TestEachItemGoesToEachSelectedClusterAndWhatGoesIsPruned(t *testing.T) {
	sel := map[string]string{"suite": "each-item", "env": "prod"}
	enroll(t, "each-1", sel)
	enroll(t, "each-2", sel)
	enroll(t, "each-3", map[string]string{"suite": "each-item", "env": "dev"})
	src := newSource(map[string]string{"a": configMap("a", "1"), "b": configMap("b", "1")})
	h := newHarness(t, "each-item", selecting(sel), src)

	d := h.round(src.items("a", "b"))
	want := map[string]string{"a/each-1": configMap("a", "1"), "a/each-2": configMap("a", "1"), "b/each-1": configMap("b", "1"), "b/each-2": configMap("b", "1")}
	if got := h.delivered(); !maps.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	if src.fetches("a") != 1 || src.fetches("b") != 1 || len(d.Problems()) > 0 {
		t.Errorf("fetched a %d and b %d times for two clusters, problems %v", src.fetches("a"), src.fetches("b"), d.Problems())
	}
	for _, vr := range resourcesOf(t, h.sync) {
		if !metav1.IsControlledBy(&vr, h.sync) || vr.Spec.Destination.Namespace != "web" || len(vr.Finalizers) != 1 {
			t.Errorf("VidraResource %s: owners %v, destination %+v, finalizers %v", vr.Name, vr.OwnerReferences, vr.Spec.Destination, vr.Finalizers)
		}
	}
	if r := h.sync.Status.Rollout; r == nil || r.Revision != 1 || r.Phase != vidrav1alpha1.RolloutCompleted {
		t.Errorf("rollout %+v, want revision 1 Completed", r)
	}

	before := versions(t, h.sync)
	h.round(src.items("a", "b"))
	if after := versions(t, h.sync); !maps.Equal(before, after) || src.fetches("a") != 1 {
		t.Errorf("an unchanged listing wrote (%v → %v) or fetched (a %d times)", before, after, src.fetches("a"))
	}

	src.set("b", configMap("b", "2"), nil)
	h.round(src.items("a", "b"))
	after := versions(t, h.sync)
	if got := h.delivered()["b/each-2"]; got != configMap("b", "2") || src.fetches("b") != 2 || src.fetches("a") != 1 {
		t.Errorf("b changed: delivered %q, fetched b %d and a %d times", got, src.fetches("b"), src.fetches("a"))
	}
	if after["a/each-1"] != before["a/each-1"] || h.sync.Status.Rollout.Revision != 2 {
		t.Errorf("a unchanged was rewritten, or the revision is %d, want 2", h.sync.Status.Rollout.Revision)
	}

	// Someone else's VidraResource with the sync's label.
	foreign := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "each-item-foreign", Labels: map[string]string{h.sync.SyncKind().Label: h.sync.Name}},
		Spec:       vidrav1alpha1.VidraResourceSpec{Manifest: configMap("foreign", "1")},
	}
	if err := hub.Client.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	h.round(src.items("b"))
	relabel(t, "each-2", map[string]string{"suite": "each-item", "env": "dev"})
	h.round(src.items("b"))
	want = map[string]string{"b/each-1": configMap("b", "2"), "/": configMap("foreign", "1")}
	if got := h.delivered(); !maps.Equal(got, want) {
		t.Errorf("after a left and each-2 left the selection, delivered %v, want %v", got, want)
	}
}

// relabel sets a VidraCluster's labels.
func relabel(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	vc := &vidrav1alpha1.VidraCluster{}
	if err := hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vc); err != nil {
		t.Fatal(err)
	}
	vc.Labels = labels
	if err := hub.Client.Update(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
}

// errUnreachable stands for a source that cannot be reached: it may pass with a retry.
var errUnreachable = errors.New("source unreachable")

// A fetch that fails, or content that is no manifest, leaves what was delivered as it
// was, prunes nothing, and says which item failed and why; the error that may pass is
// kept to back off on.
func TestAFailedFetchKeepsWhatWasDeliveredAndSaysWhy(t *testing.T) {
	src := newSource(map[string]string{"a": configMap("a", "1"), "b": configMap("b", "1"), "c": configMap("c", "1")})
	opts := vidrav1alpha1.SyncOptions{Destination: vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: "failed-fetch", Namespace: "web"}}}
	h := newHarness(t, "failed-fetch", opts, src)
	h.cfg.Transient = func(err error) bool { return errors.Is(err, errUnreachable) }
	h.round(src.items("a", "b", "c"))
	before := versions(t, h.sync)

	src.set("a", configMap("a", "2"), fmt.Errorf("fetch a: %w", errUnreachable))
	src.set("b", "this: is: not: a manifest", nil)
	src.set("c", configMap("c", "2"), nil)
	d := h.round(src.items("a", "b", "c"))

	if after := versions(t, h.sync); after["a/failed-fetch"] != before["a/failed-fetch"] || after["b/failed-fetch"] != before["b/failed-fetch"] {
		t.Errorf("a failed item's VidraResource was written: %v → %v", before, after)
	}
	want := map[string]string{"a/failed-fetch": configMap("a", "1"), "b/failed-fetch": configMap("b", "1"), "c/failed-fetch": configMap("c", "2")}
	if got := h.delivered(); !maps.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	problems := strings.Join(d.Problems(), "\n")
	if len(d.Problems()) != 2 || !strings.Contains(problems, "bundle a") || !strings.Contains(problems, "source unreachable") ||
		!strings.Contains(problems, "bundle b") || !strings.Contains(problems, "not a Kubernetes manifest") {
		t.Errorf("problems:\n%s", problems)
	}
	if !errors.Is(d.Transient(), errUnreachable) {
		t.Errorf("transient error %v, want the unreachable source", d.Transient())
	}
	for _, b := range h.sync.Status.Bundles {
		if (b.ID == "c") != (b.Message == "") || len(b.VidraResources) != 1 {
			t.Errorf("status of %s: message %q, VidraResources %v", b.ID, b.Message, b.VidraResources)
		}
	}
	if r := h.sync.Status.Rollout; !strings.Contains(r.Message, "not delivered everywhere") {
		t.Errorf("rollout message %q does not say the revision is not delivered everywhere", r.Message)
	}
}

// Content over the inline limit is stored once in the content store, and every
// cluster's VidraResource refers to it; without a store it is refused with the reason.
func TestContentOverTheInlineLimitIsStoredOnceForEveryCluster(t *testing.T) {
	sel := map[string]string{"suite": "large"}
	enroll(t, "large-1", sel)
	enroll(t, "large-2", sel)
	big := configMap("big", strings.Repeat("x", 4<<10))
	src := newSource(map[string]string{"big": big})
	h := newHarness(t, "large", selecting(sel), src)
	h.cfg.InlineLimit = 1 << 10
	h.round(src.items("big"))

	digests := map[string]bool{}
	for _, vr := range resourcesOf(t, h.sync) {
		if vr.Spec.Manifest != "" || vr.Spec.Content == nil {
			t.Fatalf("VidraResource %s holds its content inline", vr.Name)
		}
		digests[vr.Spec.Content.Digest] = true
	}
	if got := h.delivered(); len(digests) != 1 || got["big/large-1"] != big || got["big/large-2"] != big || src.fetches("big") != 1 {
		t.Errorf("digests %v, fetched %d times, delivered %d bundles", digests, src.fetches("big"), len(got))
	}

	noStore := newHarness(t, "large-no-store", selecting(sel), src)
	noStore.cfg.InlineLimit, noStore.cfg.Content = 1<<10, nil
	d := noStore.round(src.items("big"))
	if len(d.Problems()) != 1 || !strings.Contains(d.Problems()[0], "no content store") || len(resourcesOf(t, noStore.sync)) != 0 {
		t.Errorf("without a store: problems %v, %d VidraResources", d.Problems(), len(resourcesOf(t, noStore.sync)))
	}
}

// TestAnItemDeliveredToManyClustersNamesTenAndCountsThemAll: the status of an item sent
// to more clusters than it names does not grow with the fleet, and counts what it
// delivers as the selection changes.
func TestAnItemDeliveredToManyClustersNamesTenAndCountsThemAll(t *testing.T) {
	sel := map[string]string{"suite": "names-ten", "env": "prod"}
	for i := range 12 {
		enroll(t, fmt.Sprintf("names-ten-%02d", i), sel)
	}
	src := newSource(map[string]string{"a": configMap("a", "1")})
	h := newHarness(t, "names-ten", selecting(sel), src)

	h.round(src.items("a"))
	st := h.sync.Status.Bundles[0]
	made := map[string]bool{}
	for _, vr := range resourcesOf(t, h.sync) {
		made[vr.Name] = true
	}
	if len(made) != 12 || st.VidraResourceCount != 12 || len(st.VidraResources) != 10 {
		t.Fatalf("made %d VidraResources; the status names %d and counts %d", len(made), len(st.VidraResources), st.VidraResourceCount)
	}
	for _, name := range st.VidraResources {
		if !made[name] {
			t.Errorf("the status names %s, which was not made", name)
		}
	}

	for i := range 4 {
		relabel(t, fmt.Sprintf("names-ten-%02d", i), map[string]string{"suite": "names-ten", "env": "dev"})
	}
	h.round(src.items("a"))
	if st := h.sync.Status.Bundles[0]; st.VidraResourceCount != 8 || len(st.VidraResources) != 8 {
		t.Errorf("4 clusters left: the status names %d and counts %d", len(st.VidraResources), st.VidraResourceCount)
	}
}
