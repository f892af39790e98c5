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

// storedContentIsItsOwners is tried as a tenant would: tenant-a may deliver to member 0,
// and may not read the content store. Team b's bundle, a Secret, is stored there and
// delivered to member 1; its digest is in its VidraResource for anyone to read. Before,
// the tenant copied that digest into a VidraResource of its own, or into a preview, and
// the operator applied (or diffed) team b's Secret on member 0. Now the digest is
// refused, saying why; a digest the VidraResource delivered before (a rollback) and
// content stored by whoever may read the store still deliver.
func (h *sharedHub) storedContentIsItsOwners(t *testing.T) {
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
	h.waitFor(t, teamB.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)

	const why = "a digest is no key to another's content"
	copied := bundle("tenant-copies-digest", vidrav1alpha1.Destination{Cluster: m0.Name, Namespace: "team-a-content"}, "")
	copied.Spec.Content = secret
	if err := h.tenant.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, copied)
	vr := h.waitFor(t, copied.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonContentRefused)
	if msg := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionStalled).Message; !strings.Contains(msg, why) || !strings.Contains(msg, tenantUser) {
		t.Errorf("Stalled: %q, want it to name %s and say %q", msg, tenantUser, why)
	}

	peeks := bundle("tenant-previews-digest", vidrav1alpha1.Destination{Cluster: m0.Name, Namespace: "team-a-content"}, configMap("peek", "v"))
	peeks.Spec.Preview = &vidrav1alpha1.PendingContent{Content: secret, Revision: "1"}
	if err := h.tenant.Create(ctx, peeks); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, peeks)
	testfleet.Eventually(t, objectsTimeout, "the preview of another's digest refused", func() (bool, error) {
		got := &vidrav1alpha1.VidraResource{}
		err := h.admin.Get(ctx, client.ObjectKeyFromObject(peeks), got)
		p := got.Status.Preview
		return err == nil && p != nil && strings.Contains(p.Message, why) && len(p.Changes) == 0, err
	})
	err := m0.Client.Get(ctx, client.ObjectKey{Namespace: "team-a-content", Name: "team-b-secret"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("team b's Secret on member 0: %v, want it never applied there", err)
	}

	// A VidraResource of the tenant's cluster, its contents stored and delivered by the
	// admin, is rolled back by the tenant to what it delivered before: that passes.
	rolled := bundle("tenant-rolls-back", vidrav1alpha1.Destination{Cluster: m0.Name, Namespace: "team-a-content"}, "")
	v1, v2 := put(configMap("rolled", "v1")), put(configMap("rolled", "v2"))
	rolled.Spec.Content = v1
	if err := h.admin.Create(ctx, rolled); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, rolled)
	h.waitFor(t, rolled.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	setContent(t, h.admin, rolled.Name, v2)
	h.waitFor(t, rolled.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
	setContent(t, h.tenant, rolled.Name, v1)
	if got := h.waitFor(t, rolled.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded); got.Annotations[vidrav1alpha1.RequestedByAnnotation] != tenantUser {
		t.Errorf("rolled back by %q, want the tenant", got.Annotations[vidrav1alpha1.RequestedByAnnotation])
	}
	setContent(t, h.tenant, rolled.Name, secret)
	h.waitFor(t, rolled.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonContentRefused)
}

// setContent points the VidraResource's spec.content at ref, as c.
func setContent(t *testing.T, c client.Client, name string, ref *vidrav1alpha1.ContentReference) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, vr); err != nil {
		t.Fatal(err)
	}
	before := vr.DeepCopy()
	vr.Spec.Content = ref
	if err := c.Patch(context.Background(), vr, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}
