package history_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

// secretBundle is an inline bundle carrying a Secret whose value is password.
func secretBundle(password string) history.Entry {
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: default}\nstringData: {password: %s}\n", password)
	return history.Entry{
		Body: history.Body{Manifest: manifest}, Digest: content.Digest([]byte(manifest)), Source: "user", Limit: 10,
		Inventory: []vidrav1alpha1.ManagedResource{{APIVersion: "v1", Kind: "Secret", Namespace: "default", Name: "db"}},
	}
}

// stored is a History of a namespace of its own whose content store is the hub's.
func stored(t *testing.T) *history.History {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "history-"}}
	if err := hub.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	store := &content.Store{Client: hub.Client, Reader: hub.Client, Namespace: ns.Name}
	return &history.History{Client: hub.Client, Reader: hub.Client, Namespace: ns.Name, Store: store}
}

// holdsNoManifest fails the test when a revision of the VidraResource holds a manifest,
// or its data says password: what Kubernetes' view role would read.
func holdsNoManifest(t *testing.T, h *history.History, vr *vidrav1alpha1.VidraResource, passwords ...string) []appsv1.ControllerRevision {
	t.Helper()
	var crs appsv1.ControllerRevisionList
	if err := hub.Client.List(context.Background(), &crs, client.InNamespace(h.Namespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(vr.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, cr := range crs.Items {
		raw := string(cr.Data.Raw)
		if strings.Contains(raw, `"manifest"`) || cr.Labels[history.StoredLabel] != "true" {
			t.Errorf("revision %s holds %s (labels %v), want only a digest", cr.Name, raw, cr.Labels)
		}
		for _, p := range passwords {
			if strings.Contains(raw, p) {
				t.Errorf("revision %s says %s", cr.Name, p)
			}
		}
	}
	return crs.Items
}

// TestRevisionsNameTheirManifestInTheStore: an inline bundle's revision holds its digest
// and inventory, never its manifest; the store holds the manifest, List reads it as
// stored content, and Digests keeps it from the collector.
func TestRevisionsNameTheirManifestInTheStore(t *testing.T) {
	ctx := context.Background()
	h := stored(t)
	vr := vidraResource("secretive")
	e := secretBundle("hunter2")
	if _, err := h.Record(ctx, vr, e); err != nil {
		t.Fatal(err)
	}
	holdsNoManifest(t, h, vr, "hunter2")
	revisions, err := h.List(ctx, vr)
	if err != nil || len(revisions) != 1 {
		t.Fatalf("revisions %+v, %v", revisions, err)
	}
	body := revisions[0].Body
	if body.Manifest != "" || body.Content == nil || body.Content.Digest != e.Digest {
		t.Fatalf("revision 1's body %+v, want the content %s", body, e.Digest)
	}
	data, err := h.Store.(*content.Store).Get(ctx, body.Content.Digest)
	if err != nil || string(data) != e.Body.Manifest {
		t.Fatalf("stored content %q, %v; want the manifest", data, err)
	}
	named, err := history.Digests(hub.Client, h.Namespace)(ctx)
	if err != nil || !named[e.Digest] {
		t.Fatalf("Digests %v, %v; want %s named", named, err, e.Digest)
	}
}

// TestMigrateMovesManifestsIntoTheStore: revisions an earlier version recorded with their
// manifest are written again naming it, with their names, numbers, annotations and
// inventories; one newer than its VidraResource's status waits until the status
// catches up; revisions that named stored content already are only marked.
func TestMigrateMovesManifestsIntoTheStore(t *testing.T) {
	ctx := context.Background()
	h := stored(t)
	earlier := &history.History{Client: hub.Client, Reader: hub.Client, Namespace: h.Namespace} // no store
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "migrated-" + h.Namespace},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "local"}, Manifest: "# none\n"},
	}
	if err := hub.Client.Create(ctx, vr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Client.Delete(context.Background(), vr) })
	passwords := []string{"first-secret", "second-secret", "third-secret"}
	for i, p := range passwords {
		e := secretBundle(p)
		e.Delivered = int64(i)
		if _, err := earlier.Record(ctx, vr, e); err != nil {
			t.Fatal(err)
		}
	}
	large := history.Entry{Body: history.Body{Content: &vidrav1alpha1.ContentReference{Digest: content.Digest([]byte("large"))}},
		Digest: content.Digest([]byte("large")), Source: "user", Limit: 10, Delivered: 3}
	rec, err := earlier.Record(ctx, vr, large)
	if err != nil {
		t.Fatal(err)
	}
	unmark(t, h, vr, rec.Number) // as an earlier version recorded it
	var before []history.Revision
	before, err = h.List(ctx, vr)
	if err != nil || len(before) != 4 {
		t.Fatalf("revisions %+v, %v", before, err)
	}

	// Its status says revision 2 was delivered: 3 waits; 4 named stored content already.
	vr.Status.Revision = 2
	if err := hub.Client.Status().Update(ctx, vr); err != nil {
		t.Fatal(err)
	}
	migrated, waiting, err := h.Migrate(ctx)
	if err != nil || migrated != 3 || waiting != 1 {
		t.Fatalf("Migrate: %d migrated, %d waiting, %v; want 3 and 1", migrated, waiting, err)
	}
	vr.Status.Revision = 4
	if err := hub.Client.Status().Update(ctx, vr); err != nil {
		t.Fatal(err)
	}
	migrated, waiting, err = h.Migrate(ctx)
	if err != nil || migrated != 1 || waiting != 0 {
		t.Fatalf("Migrate again: %d migrated, %d waiting, %v; want 1 and 0", migrated, waiting, err)
	}
	crs := holdsNoManifest(t, h, vr, passwords...)
	after, err := h.List(ctx, vr)
	if err != nil || len(after) != len(before) || len(crs) != len(before) {
		t.Fatalf("revisions after %+v, %v; want %d", after, err, len(before))
	}
	for i, b := range before {
		a := after[i]
		if a.Name != b.Name || a.Number != b.Number || a.Digest != b.Digest || a.Source != b.Source || a.Result != b.Result {
			t.Errorf("revision %d was %+v, is %+v", b.Number, b, a)
		}
		if a.Body.Content == nil || a.Body.Content.Digest != b.Digest {
			t.Errorf("revision %d names %+v, want %s", a.Number, a.Body.Content, b.Digest)
		}
		if i < len(passwords) {
			data, err := h.Store.(*content.Store).Get(ctx, b.Digest)
			if err != nil || string(data) != b.Body.Manifest {
				t.Errorf("revision %d's stored manifest %q, %v; want %q", b.Number, data, err, b.Body.Manifest)
			}
		}
	}
	for _, cr := range crs {
		if owner := metav1.GetControllerOf(&cr); owner == nil || owner.UID != vr.UID {
			t.Errorf("revision %s is controlled by %+v after migrating", cr.Name, owner)
		}
	}
	// Each names what it named before: still the record of its objects.
	pending, err := h.Pending(ctx, &vidrav1alpha1.VidraResource{ObjectMeta: vr.ObjectMeta})
	if err != nil || len(pending) != len(passwords) || pending[0].Name != "db" {
		t.Errorf("the inventory the revisions name: %+v, %v", pending, err)
	}
	if migrated, waiting, err = h.Migrate(ctx); err != nil || migrated+waiting != 0 {
		t.Errorf("a third pass found %d to migrate and %d waiting, %v", migrated, waiting, err)
	}
}

// unmark removes StoredLabel from revision number of the VidraResource.
func unmark(t *testing.T, h *history.History, vr *vidrav1alpha1.VidraResource, number int64) {
	t.Helper()
	ctx := context.Background()
	var crs appsv1.ControllerRevisionList
	if err := hub.Client.List(ctx, &crs, client.InNamespace(h.Namespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(vr.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, cr := range crs.Items {
		if cr.Revision == number {
			patch := client.MergeFrom(cr.DeepCopy())
			delete(cr.Labels, history.StoredLabel)
			if err := hub.Client.Patch(ctx, &cr, patch); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no revision %d", number)
}
