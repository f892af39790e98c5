package operator_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// TestStoredContentWhereNoRequesterIsRecorded: on an API server that serves no
// MutatingAdmissionPolicy (before Kubernetes 1.36) the chart installs no requester
// policy, and a VidraResource need not say who wrote it. Before, one that did not was
// taken for the operator's, and a tenant who copied another team's digest (readable in
// its sync's or VidraResource's status) had the operator apply that team's stored Secret
// on the tenant's cluster. Now such a reference is refused, saying why; a rollback to
// content the VidraResource delivered before still delivers.
func TestStoredContentWhereNoRequesterIsRecorded(t *testing.T) {
	h := startHub(t, false)
	ctx := context.Background()
	m0, m1 := h.fleet.Members[0], h.fleet.Members[1]
	store := &content.Store{Client: h.admin, Reader: h.admin, Namespace: testoperator.Namespace}
	put := func(text string) *vidrav1alpha1.ContentReference {
		digest, err := store.Put(ctx, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return &vidrav1alpha1.ContentReference{Digest: digest}
	}
	secret := put("apiVersion: v1\nkind: Secret\nmetadata:\n  name: team-b-secret\nstringData:\n  token: team-b-token\n")
	teamB := bundle("team-b-stored", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "team-b-stored"}, "")
	teamB.Spec.Content = secret
	if err := h.admin.Create(ctx, teamB); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, teamB)

	copied := bundle("tenant-copies-digest", vidrav1alpha1.Destination{Cluster: m0.Name, Namespace: "team-a-content"}, "")
	copied.Spec.Content = secret
	if err := h.tenant.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, copied)
	vr := h.waitFor(t, copied.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonContentRefused)
	if msg := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionStalled).Message; !strings.Contains(msg, "records no requester") {
		t.Errorf("Stalled: %q, want it to say the API server records no requester", msg)
	}
	err := m0.Client.Get(ctx, client.ObjectKey{Namespace: "team-a-content", Name: "team-b-secret"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("team b's Secret on member 0: %v, want it never applied there", err)
	}

	// A rollback names the stored content of a revision the VidraResource delivered, as
	// kubectl vidra rollback writes it: that still delivers.
	rolled := bundle("tenant-rolls-back", vidrav1alpha1.Destination{Cluster: m0.Name, Namespace: "team-a-content"}, configMap("rolled", "v1"))
	if err := h.tenant.Create(ctx, rolled); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, rolled)
	h.waitFor(t, rolled.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	onMember := func(text string) {
		t.Helper()
		testfleet.Eventually(t, objectsTimeout, "ConfigMap rolled says "+text+" on member 0", func() (bool, error) {
			cm := &corev1.ConfigMap{}
			err := m0.Client.Get(ctx, client.ObjectKey{Namespace: "team-a-content", Name: "rolled"}, cm)
			return err == nil && cm.Data["text"] == text, nil
		})
	}
	onMember("v1")
	writeBundle(t, h.tenant, rolled.Name, configMap("rolled", "v2"), nil)
	onMember("v2")
	writeBundle(t, h.tenant, rolled.Name, "", &vidrav1alpha1.ContentReference{Digest: content.Digest([]byte(configMap("rolled", "v1")))})
	onMember("v1")
	// And the same tenant naming team b's digest there is refused.
	writeBundle(t, h.tenant, rolled.Name, "", secret)
	h.waitFor(t, rolled.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonContentRefused)
}

// writeBundle sets the VidraResource's manifest and content, as c.
func writeBundle(t *testing.T, c client.Client, name, manifest string, ref *vidrav1alpha1.ContentReference) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, vr); err != nil {
		t.Fatal(err)
	}
	before := vr.DeepCopy()
	vr.Spec.Manifest, vr.Spec.Content = manifest, ref
	if err := c.Patch(context.Background(), vr, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}
