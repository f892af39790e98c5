package operator_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// bundlesWaitForThePolicies is tried as a tenant on a hub whose requester policy binding
// is gone. Before, a VidraResource naming a member by server URL was admitted without a
// stamp, and the operator, finding no requester, delivered it unchecked: to a cluster the
// tenant may not deliver to. Now the operator sees the binding missing and refuses such a
// bundle, saying which policy is missing; once the binding is back, a bundle written
// meanwhile is still refused until its spec is applied again and so stamped.
func (h *sharedHub) bundlesWaitForThePolicies(t *testing.T) {
	ctx := context.Background()
	m1 := h.fleet.Members[1]
	restore := h.withoutRequesterPolicy(t)

	// The tenant may deliver to member 0 only; member 1 named by its server URL.
	vr := bundle("tenant-unstamped", vidrav1alpha1.Destination{Server: m1.Server(), Namespace: "team-a-unstamped"}, configMap("u", "v"))
	if err := h.tenant.Create(ctx, vr); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, vr)
	got := h.waitFor(t, vr.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonAdmissionPoliciesMissing)
	msg := meta.FindStatusCondition(got.Status.Conditions, vidrav1alpha1.ConditionStalled).Message
	for _, want := range []string{"MutatingAdmissionPolicy " + chartRelease + "-deliver-requester has no binding", "names its cluster by server URL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled: %q, want it to say %q", msg, want)
		}
	}
	if len(got.Status.ManagedResources) > 0 {
		t.Errorf("refused, yet it manages %v", got.Status.ManagedResources)
	}

	restore()
	got = h.waitFor(t, vr.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonAdmissionPoliciesMissing)
	if msg := meta.FindStatusCondition(got.Status.Conditions, vidrav1alpha1.ConditionStalled).Message; !strings.Contains(msg, "does not say who asked for it") {
		t.Errorf("Stalled with the policies back: %q, want it to say the bundle does not say who asked", msg)
	}
	// The operator has matched the URL to member 1 (status.cluster): the tenant may no
	// longer change it at all; an admin who applies it again has it stamped, and delivered.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Manifest = configMap("u", "v2")
	refused(t, h.tenant.Patch(ctx, got.DeepCopy(), patch), tenantUser+" may not deliver to cluster "+m1.Name)
	if err := h.admin.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, vr.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
}

// syncsWaitForThePolicies is tried as a tenant on a hub whose requester policy binding is
// gone. Before, the tenant's InfrahubSync was synced meanwhile: the operator took every
// sync as one admission had checked, whatever was missing, and its VidraResources, made
// by the operator, were delivered as a sync's. Now no sync is synced until the policies
// are back, it says which is missing, and its source hears nothing meanwhile; once they
// are back, it is synced at once.
func (h *sharedHub) syncsWaitForThePolicies(t *testing.T) {
	ctx := context.Background()
	src := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	t.Cleanup(src.Close)
	src.Put("main", infrahubtest.Artifact{ID: "waits-1", Name: "waits", TargetLabel: "t1", DefinitionName: "waits", Content: configMap("waits", "v")})
	restore := h.withoutRequesterPolicy(t)

	sync := &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: "tenant-waits"}, Spec: vidrav1alpha1.InfrahubSyncSpec{
		Source:      vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: src.URL(), InsecureAllowHTTP: true, ArtefactName: "waits"},
		Destination: vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Cluster: h.fleet.Members[0].Name, Namespace: "team-a"}},
		Interval:    &metav1.Duration{Duration: time.Hour},
	}}
	if err := h.tenant.Create(ctx, sync); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, sync)
	h.syncStalled(t, sync.Name, vidrav1alpha1.ReasonAdmissionPoliciesMissing,
		"MutatingAdmissionPolicy "+chartRelease+"-deliver-requester has no binding", "this InfrahubSync was written by a person")
	if n := src.GraphQLRequests(); n != 0 {
		t.Errorf("the sync asked its Infrahub %d times while the policies were missing", n)
	}

	restore()
	h.syncCondition(t, sync.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
}

// forgedSyncBundlesWaitForThePolicies is tried as a tenant on a hub whose deliver policy
// binding is gone. Before, the tenant wrote a VidraResource for member 1, where it may not
// deliver, naming the admin's sync as its controller (its UID is for anyone to read), and
// the operator, taking it for the sync's, delivered it. Now no VidraResource is delivered
// while a policy is missing, whoever it says made it.
func (h *sharedHub) forgedSyncBundlesWaitForThePolicies(t *testing.T) {
	ctx := context.Background()
	m1 := h.fleet.Members[1]
	sync := &vidrav1alpha1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: "admins-suspended-sync"}, Spec: vidrav1alpha1.GitSyncSpec{
		Source: vidrav1alpha1.GitSource{URL: "https://git.example/fleet"},
		SyncOptions: vidrav1alpha1.SyncOptions{Suspend: true,
			Destination: vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "team-b"}}},
	}}
	if err := h.admin.Create(ctx, sync); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, sync)
	restore := h.withoutDeliverPolicy(t)
	defer restore()

	vr := bundle("tenant-forges-a-sync", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "team-a-forged"}, configMap("forged", "v"))
	vr.OwnerReferences = []metav1.OwnerReference{{APIVersion: vidrav1alpha1.GroupVersion.String(), Kind: "GitSync",
		Name: sync.Name, UID: sync.UID, Controller: ptr.To(true)}}
	if err := h.tenant.Create(ctx, vr); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, vr)
	got := h.waitFor(t, vr.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonAdmissionPoliciesMissing)
	msg := meta.FindStatusCondition(got.Status.Conditions, vidrav1alpha1.ConditionStalled).Message
	for _, want := range []string{"ValidatingAdmissionPolicy " + chartRelease + "-deliver has no binding", "names a sync as its controller"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled: %q, want it to say %q", msg, want)
		}
	}
	if err := m1.Client.Get(ctx, client.ObjectKey{Namespace: "team-a-forged", Name: "forged"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the forged bundle's ConfigMap on member 1: %v, want it never applied", err)
	}
}

// withoutDeliverPolicy deletes the deliver policy's binding until restore is called (or
// the test ends), and waits until the API server no longer enforces it.
func (h *sharedHub) withoutDeliverPolicy(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := h.admin.Get(ctx, client.ObjectKey{Name: chartRelease + "-deliver"}, binding); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	enforced := func(want bool) func() (bool, error) {
		return func() (bool, error) {
			probe := bundle("probe-deliver-policy", vidrav1alpha1.Destination{Cluster: h.fleet.Members[1].Name}, configMap("p", "v"))
			err := h.tenant.Create(ctx, probe, client.DryRunAll)
			return (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) == want, nil
		}
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			binding.ResourceVersion, binding.UID = "", ""
			if err := h.admin.Create(ctx, binding); err != nil {
				t.Error(err)
				return
			}
			testfleet.Eventually(t, objectsTimeout, "the deliver policy back in force", enforced(true))
		})
	}
	t.Cleanup(restore)
	testfleet.Eventually(t, objectsTimeout, "the deliver policy out of force", enforced(false))
	return restore
}
