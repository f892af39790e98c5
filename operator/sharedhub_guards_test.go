package operator_test

import (
	"context"
	"strings"
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
// are back, it is not synced either: written while nothing recorded who asked, it waits
// until its spec is changed, and so stamped.
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
		// The sync's work on the hub is what is asserted, not the member's: there an
		// earlier case left namespace team-a terminating (no namespace controller runs).
		Wait: ptr.To(false),
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
	h.syncStalled(t, sync.Name, vidrav1alpha1.ReasonPolicyDenied, "this InfrahubSync was last written at",
		"while the hub's admission policy that records who asks was not in force")
	if n := src.GraphQLRequests(); n != 0 {
		t.Errorf("the sync written while nothing recorded who asked asked its Infrahub %d times", n)
	}
	patch := client.MergeFrom(sync.DeepCopy())
	sync.Spec.Interval = &metav1.Duration{Duration: 2 * time.Hour}
	if err := h.tenant.Patch(ctx, sync, patch); err != nil {
		t.Fatal(err)
	}
	h.syncCondition(t, sync.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
}

// forgedSyncBundlesWaitForThePolicies is tried as a tenant on a hub whose deliver policy
// binding is gone. Before, the tenant wrote a VidraResource for member 1, where it may not
// deliver, naming the admin's sync as its controller (its UID is for anyone to read), and
// the operator, taking it for the sync's, delivered it. Now no VidraResource is delivered
// while a policy is missing; the forged one says the tenant asked for it (the requester
// policy stamped it), so it is the tenant's, not the sync's, and once the policy is back
// it is refused as the tenant's.
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
	for _, want := range []string{"ValidatingAdmissionPolicy " + chartRelease + "-deliver has no binding", "written by a person"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled: %q, want it to say %q", msg, want)
		}
	}
	restore()
	got = h.waitFor(t, vr.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonPolicyDenied)
	if msg := meta.FindStatusCondition(got.Status.Conditions, vidrav1alpha1.ConditionStalled).Message; !strings.Contains(msg, tenantUser+", who last changed it, may not deliver to cluster "+m1.Name) {
		t.Errorf("Stalled with the policy back: %q, want it to say %s may not deliver to %s", msg, tenantUser, m1.Name)
	}
	if err := m1.Client.Get(ctx, client.ObjectKey{Namespace: "team-a-forged", Name: "forged"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the forged bundle's ConfigMap on member 1: %v, want it never applied", err)
	}
}

// writtenMeanwhileIsCheckedOnceThePoliciesAreBack is tried as a tenant on a hub whose
// deliver policy binding is gone. Before, what the tenant wrote meanwhile was refused
// while the binding was missing and delivered once it was back, unchecked: a
// VidraResource for member 1, where it may not deliver; an InfrahubSync for every cluster;
// and a stamp rewritten, by an update that kept the spec, to name someone who may
// deliver anywhere. Now the requester policy stamps that update with the tenant, and once
// the binding is back the operator asks the API server whether the tenant may deliver
// there, as admission would have: all are refused, and nothing reaches member 1.
func (h *sharedHub) writtenMeanwhileIsCheckedOnceThePoliciesAreBack(t *testing.T) {
	ctx := context.Background()
	m1 := h.fleet.Members[1]
	src := infrahubtest.New(infrahubtest.Options{AllowAnonymous: true})
	t.Cleanup(src.Close)
	src.Put("main", infrahubtest.Artifact{ID: "meanwhile-1", Name: "meanwhile", TargetLabel: "t1", DefinitionName: "meanwhile", Content: configMap("meanwhile", "v")})
	byURL := bundle("tenant-by-url", vidrav1alpha1.Destination{Server: m1.Server(), Namespace: "team-a-meanwhile"}, configMap("by-url", "v"))
	if err := h.tenant.Create(ctx, byURL); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, byURL)
	h.waitFor(t, byURL.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonPolicyDenied)
	restore := h.withoutDeliverPolicy(t)
	defer restore()

	direct := bundle("tenant-meanwhile", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "team-a-meanwhile"}, configMap("meanwhile", "v"))
	if err := h.tenant.Create(ctx, direct); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, direct)
	everywhere := &vidrav1alpha1.InfrahubSync{ObjectMeta: metav1.ObjectMeta{Name: "tenant-everywhere"}, Spec: vidrav1alpha1.InfrahubSyncSpec{
		Source: vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: src.URL(), InsecureAllowHTTP: true, ArtefactName: "meanwhile"},
		Destination: vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Namespace: "team-a-meanwhile"},
			ClusterSelector: &metav1.LabelSelector{}},
		Interval: &metav1.Duration{Duration: time.Hour},
	}}
	if err := h.tenant.Create(ctx, everywhere); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, everywhere)
	// The stamp rewritten by an update that keeps the spec: the requester policy stamps it
	// with the tenant again.
	forged := byURL.DeepCopy()
	if err := h.tenant.Get(ctx, client.ObjectKeyFromObject(byURL), forged); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(forged.DeepCopy())
	forged.Annotations[vidrav1alpha1.RequestedByAnnotation] = "someone-who-may"
	forged.Annotations[vidrav1alpha1.RequestedByGroupsAnnotation] = "system:masters"
	if err := h.tenant.Patch(ctx, forged, patch); err != nil {
		t.Fatal(err)
	}
	if who, groups := forged.Annotations[vidrav1alpha1.RequestedByAnnotation], forged.Annotations[vidrav1alpha1.RequestedByGroupsAnnotation]; who != tenantUser || strings.Contains(groups, "system:masters") {
		t.Errorf("the rewritten stamp reads %q, groups %q; want %s, stamped again by the requester policy", who, groups, tenantUser)
	}
	h.waitFor(t, direct.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonAdmissionPoliciesMissing)
	h.syncStalled(t, everywhere.Name, vidrav1alpha1.ReasonAdmissionPoliciesMissing)

	restore()
	for _, name := range []string{direct.Name, byURL.Name} {
		got := h.waitFor(t, name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonPolicyDenied)
		if msg := meta.FindStatusCondition(got.Status.Conditions, vidrav1alpha1.ConditionStalled).Message; !strings.Contains(msg, tenantUser+", who last changed it, may not deliver to cluster "+m1.Name) {
			t.Errorf("%s Stalled with the policy back: %q, want it to say %s may not deliver to %s", name, msg, tenantUser, m1.Name)
		}
	}
	h.syncStalled(t, everywhere.Name, vidrav1alpha1.ReasonPolicyDenied, tenantUser+", who last changed it, may not deliver to every cluster")
	if n := src.GraphQLRequests(); n != 0 {
		t.Errorf("the sync written meanwhile asked its Infrahub %d times", n)
	}
	for _, name := range []string{"meanwhile", "by-url"} {
		if err := m1.Client.Get(ctx, client.ObjectKey{Namespace: "team-a-meanwhile", Name: name}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s on member 1: %v, want it never applied", name, err)
		}
	}
}

// stampsWrittenInAGapAreNotTrusted is tried as a tenant on a hub whose requester and
// deliver policy bindings are both gone. Before, the tenant wrote a VidraResource for
// member 1, where it may not deliver, stamped with the name and group of someone who may
// deliver anywhere; nothing refused or overwrote the stamp, and once the bindings were
// back the operator asked whether that someone may deliver there, and delivered it. Now
// the operator records when the requester policy went and came back, and refuses what was
// last written in between until its spec is written again, and so stamped and checked.
func (h *sharedHub) stampsWrittenInAGapAreNotTrusted(t *testing.T) {
	ctx := context.Background()
	m1 := h.fleet.Members[1]
	restoreRequester := h.withoutRequesterPolicy(t)
	restoreDeliver := h.withoutDeliverPolicy(t)
	forged := bundle("tenant-forged-in-gap", vidrav1alpha1.Destination{Cluster: m1.Name, Namespace: "team-a-gap"}, configMap("gap", "v"))
	forged.Annotations = map[string]string{vidrav1alpha1.RequestedByAnnotation: "cluster-admin", vidrav1alpha1.RequestedByGroupsAnnotation: "system:masters"}
	if err := h.tenant.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	cleanup(t, h.admin, forged)
	if who := forged.Annotations[vidrav1alpha1.RequestedByAnnotation]; who != "cluster-admin" {
		t.Fatalf("the forged stamp reads %q: the requester policy was in force", who)
	}
	h.waitFor(t, forged.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonAdmissionPoliciesMissing)

	restoreRequester()
	restoreDeliver()
	got := h.waitFor(t, forged.Name, vidrav1alpha1.ConditionStalled, vidrav1alpha1.ReasonPolicyDenied)
	msg := meta.FindStatusCondition(got.Status.Conditions, vidrav1alpha1.ConditionStalled).Message
	for _, want := range []string{"this VidraResource was last written at", "change its spec, or create it again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled with the policies back: %q, want it to say %q", msg, want)
		}
	}
	if err := m1.Client.Get(ctx, client.ObjectKey{Namespace: "team-a-gap", Name: "gap"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap gap on member 1: %v, want it never applied", err)
	}
	// Its spec changed by someone who may deliver there is stamped, checked and delivered.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Manifest = configMap("gap", "v2")
	if err := h.admin.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, forged.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonSucceeded)
}

// withoutDeliverPolicy deletes the deliver policy's binding until restore is called (or
// the test ends), and waits until the API server no longer enforces it.
func (h *sharedHub) withoutDeliverPolicy(t *testing.T) (restore func()) {
	t.Helper()
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	return h.withoutBinding(t, binding, chartRelease+"-deliver", "the deliver policy", func(inForce bool) func() (bool, error) {
		return func() (bool, error) {
			probe := bundle("probe-deliver-policy", vidrav1alpha1.Destination{Cluster: h.fleet.Members[1].Name}, configMap("p", "v"))
			err := h.tenant.Create(context.Background(), probe, client.DryRunAll)
			return (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) == inForce, nil
		}
	})
}
