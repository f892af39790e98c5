package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/test/testbundle"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

// repairTimeout bounds drift repair: "within seconds", with room for a starved machine.
const repairTimeout = 20 * time.Second

// testPullBundles: a CRD of a brand-new API group with a resource of it, and a bundle
// too large to sit inline (the content store), reach the pull member.
func testPullBundles(t *testing.T, h *pullHub) {
	ctx := context.Background()
	h.vidraResource(t, "pull-widgets", h.pullMember.Name, widgetBundle, nil)
	h.resource(t, "pull-widgets", "Ready", ready)
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(schema.GroupVersionKind{Group: "pull.example", Version: "v1", Kind: "Widget"})
	if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "first"}, widget); err != nil {
		t.Fatalf("the Widget of the new API group is not on the member: %v", err)
	}

	// A bundle of real size and shape: CRDs with large schemas, their resources, and
	// ConfigMaps, 3 MiB, too large to sit inline.
	b, err := testbundle.New(testbundle.Options{MinBytes: 3 << 20, Group: "pull.bundle.example", WithoutKubeVirt: true})
	if err != nil {
		t.Fatal(err)
	}
	store := &content.Store{Client: h.admin, Reader: h.admin, Namespace: testoperator.Namespace}
	digest, err := store.Put(ctx, b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	h.vidraResource(t, "pull-large", h.pullMember.Name, "", &vidrav1alpha1.ContentReference{Digest: digest})
	// Alone, Ready comes in about 14 s: the 3 MiB are copied to the cluster's namespace on
	// the hub and to the member and applied (7 s; its CRDs are judged as the apply's wait
	// saw them established), and the agent reports (3 s). The whole suite's load doubles it.
	vr := h.resourceWithin(t, largeBundleTimeout, "pull-large", "Ready", ready)
	if int(vr.Status.ResourceCount) != b.Objects() {
		t.Fatalf("the hub shows %d objects of the large bundle, want %d", vr.Status.ResourceCount, b.Objects())
	}
	for _, name := range []string{b.ConfigMaps[0], b.ConfigMaps[len(b.ConfigMaps)-1]} {
		if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Fatalf("ConfigMap %s of the large bundle: %v", name, err)
		}
	}
	for _, name := range b.CRDs {
		if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Fatalf("CRD %s of the large bundle: %v", name, err)
		}
	}
	// The copy of the content in the cluster's namespace goes once nothing names it.
	mirrored := client.ObjectKey{Namespace: pull.Namespace(h.pullMember.Name), Name: content.ChunkName(digest, 0)}
	if err := h.admin.Get(ctx, mirrored, &corev1.Secret{}); err != nil {
		t.Fatalf("the content was not mirrored where the agent reads it: %v", err)
	}
	h.deleteResource(t, "pull-large")
	testfleet.Eventually(t, objectsTimeout, "the mirrored content collected", func() (bool, error) {
		err := h.admin.Get(ctx, mirrored, &corev1.Secret{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// largeBundleTimeout bounds the wait for the large bundle of a pull cluster to be Ready.
const largeBundleTimeout = time.Minute

// testPullShared: an object two bundles declare stays until the last of them lets go.
func testPullShared(t *testing.T, h *pullHub) {
	ctx := context.Background()
	shared := appConfigMap("shared", "both")
	h.vidraResource(t, "pull-share-a", h.pullMember.Name, shared, nil)
	h.vidraResource(t, "pull-share-b", h.pullMember.Name, shared, nil)
	h.resource(t, "pull-share-a", "Ready", ready)
	h.resource(t, "pull-share-b", "Ready", ready)
	owners := func() []string {
		cm := &corev1.ConfigMap{}
		if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "shared"}, cm); err != nil {
			return nil
		}
		got, err := ownership.Owners(cm)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	a, b := ownership.ID(testoperator.HubID, "pull-share-a"), ownership.ID(testoperator.HubID, "pull-share-b")
	testfleet.Eventually(t, objectsTimeout, "both bundles own the shared ConfigMap", func() (bool, error) {
		got := owners()
		return slices.Contains(got, a) && slices.Contains(got, b), nil
	})
	h.deleteResource(t, "pull-share-a")
	if got := owners(); !slices.Equal(got, []string{b}) {
		t.Fatalf("after the first owner let go, owners are %v, want [%s]", got, b)
	}
	h.deleteResource(t, "pull-share-b")
	testfleet.Eventually(t, objectsTimeout, "the shared ConfigMap deleted with its last owner", func() (bool, error) {
		err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "shared"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// testPullVMRollout: VMs delivered to a pull member whose new spec needs a restart are
// restarted by the agent, one at a time, and the hub shows the rollout.
func testPullVMRollout(t *testing.T, h *pullHub) {
	ctx := context.Background()
	vm := func(name, memory string) string {
		return fmt.Sprintf("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  runStrategy: Always\n  template:\n    spec:\n      domain:\n        devices: {}\n        resources:\n          requests: {memory: %s}\n", name, appNamespace, memory)
	}
	manifest := func(memory string) string { return vm("vm-a", memory) + "---\n" + vm("vm-b", memory) }
	h.vidraResource(t, "pull-vms", h.pullMember.Name, manifest("64Mi"), nil)
	h.resource(t, "pull-vms", "Ready with its VMs running", func(vr *vidrav1alpha1.VidraResource) bool {
		return ready(vr) && vr.Status.VMRollout != nil && vr.Status.VMRollout.Total == 2
	})
	testfleet.Eventually(t, objectsTimeout, "both VMs running", func() (bool, error) {
		for _, name := range []string{"vm-a", "vm-b"} {
			vm := &kubevirtv1.VirtualMachine{}
			if err := h.pullMember.Client.Get(ctx, types.NamespacedName{Namespace: appNamespace, Name: name}, vm); err != nil || !vm.Status.Ready {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	})
	h.kubevirt.ResetMaxUnavailable(appNamespace)
	// The operator writes the VidraResource meanwhile: read again on a conflict.
	testfleet.Edit(t, h.admin, &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "pull-vms"}}, func(vr *vidrav1alpha1.VidraResource) {
		vr.Spec.Manifest = manifest("128Mi")
	})
	h.resource(t, "pull-vms", "VMs restarted with their new spec", func(vr *vidrav1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionVMRollout)
		return c != nil && c.ObservedGeneration == vr.Generation && c.Status == metav1.ConditionTrue && vr.Status.VMRollout != nil &&
			vr.Status.VMRollout.Phase == vidrav1alpha1.VMRolloutCompleted && vr.Status.VMRollout.Updated == 2
	})
	for _, name := range []string{"vm-a", "vm-b"} {
		if n := h.kubevirt.Restarts(types.NamespacedName{Namespace: appNamespace, Name: name}); n != 1 {
			t.Errorf("VM %s restarted %d times, want 1", name, n)
		}
	}
	if got := h.kubevirt.MaxUnavailable(appNamespace); got != 1 {
		t.Errorf("%d VMs were unavailable at once, want 1 (the default budget)", got)
	}
}

// deleteResource deletes a hub VidraResource and waits until it is gone: its agent
// released what it delivered.
func (h *pullHub) deleteResource(t *testing.T, name string) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	vr.Name = name
	if err := h.admin.Delete(context.Background(), vr); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, objectsTimeout, "VidraResource "+name+" released and gone", func() (bool, error) {
		err := h.admin.Get(context.Background(), client.ObjectKey{Name: name}, &vidrav1alpha1.VidraResource{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// testAutonomy pauses the hub's API server: the agent repairs drift from its copy, an
// agent restarted meanwhile comes back with the same state, and once the hub answers
// again the statuses catch up.
func testAutonomy(t *testing.T, h *pullHub) {
	ctx := context.Background()
	web := h.syncResources(t, 2)[h.pullMember.Name]
	copies := func() []string {
		var list vidrav1alpha1.VidraResourceList
		if err := h.pullMember.Client.List(ctx, &list, client.MatchingLabels{vidrav1alpha1.PulledFromLabel: h.pullMember.Name}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, vr := range list.Items {
			names = append(names, vr.Name)
		}
		slices.Sort(names)
		return names
	}
	before := copies()
	if !slices.Contains(before, web.Name) {
		t.Fatalf("the member holds no copy of %s: %v", web.Name, before)
	}

	h.fleet.Hub.PauseInTest(t)
	drift := func(what string) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		cm.Namespace, cm.Name = appNamespace, "web"
		if err := h.pullMember.Client.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
		testfleet.Eventually(t, repairTimeout, what, func() (bool, error) {
			err := h.pullMember.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)
			return err == nil && cm.Data["value"] == "v2", client.IgnoreNotFound(err)
		})
	}
	drift("drift repaired with the hub paused")
	h.stopAgent(t)
	h.startAgent(t, "")
	drift("drift repaired by an agent restarted with the hub paused")
	if after := copies(); !slices.Equal(before, after) {
		t.Fatalf("the restarted agent holds %v, before %v", after, before)
	}
	local := &vidrav1alpha1.VidraResource{}
	if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Name: web.Name}, local); err != nil {
		t.Fatal(err)
	}
	repairedAt := local.Status.LastSyncTime
	if repairedAt == nil {
		t.Fatal("the copy shows no sync time after the repair")
	}

	resumedAt := time.Now()
	if err := h.fleet.Hub.Resume(); err != nil {
		t.Fatal(err)
	}
	h.resource(t, web.Name, "caught up with the repair made while the hub was paused", func(vr *vidrav1alpha1.VidraResource) bool {
		return ready(vr) && vr.Status.LastSyncTime != nil && !vr.Status.LastSyncTime.Before(repairedAt)
	})
	h.cluster(t, h.pullMember.Name, "reporting again", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Phase == vidrav1alpha1.ClusterEngaged && vc.Status.Agent != nil && vc.Status.Agent.LastHeartbeat != nil &&
			vc.Status.Agent.LastHeartbeat.After(resumedAt)
	})
}

// testVersionSkew: an agent of another version than the hub's says so on the VidraCluster.
func testVersionSkew(t *testing.T, h *pullHub) {
	h.stopAgent(t)
	h.startAgent(t, "v0.0.0-skewed")
	vc := h.cluster(t, h.pullMember.Name, "showing the agent's version", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Agent != nil && vc.Status.Agent.Version == "v0.0.0-skewed"
	})
	if !strings.Contains(vc.Status.Agent.Message, "v0.0.0-skewed") || vc.Status.Phase != vidrav1alpha1.ClusterEngaged {
		t.Fatalf("an agent of another version: phase %s, message %q", vc.Status.Phase, vc.Status.Agent.Message)
	}
	h.stopAgent(t)
	h.startAgent(t, "")
	h.cluster(t, h.pullMember.Name, "agent of the hub's version", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Agent != nil && vc.Status.Agent.Message == "" && vc.Status.Agent.Version != "v0.0.0-skewed"
	})
}

// testTokenRenewal: the agent renews its token on the hub before it expires, keeps it in
// its Secret, and the hub shows the new expiry.
func testTokenRenewal(t *testing.T, h *pullHub) {
	ctx := context.Background()
	token := func() string {
		s := &corev1.Secret{}
		if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: testoperator.AgentNamespace, Name: vidrav1alpha1.AgentSecretName}, s); err != nil {
			t.Fatal(err)
		}
		tok, err := identity.TokenOf(s.Data[vidrav1alpha1.AgentSecretKubeconfigKey])
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	before := token()
	vc := h.cluster(t, h.pullMember.Name, "showing the token's expiry", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Identity != nil && vc.Status.Identity.ExpiresAt != nil
	})
	expiresBefore := vc.Status.Identity.ExpiresAt.Time
	h.stopAgent(t)
	// A renewal point of a hundred-thousandth: the next heartbeat renews.
	h.startAgent(t, "", func(o *operator.Options) { o.AgentTokenRenewalPoint = 1e-5 })
	testfleet.Eventually(t, objectsTimeout, "the agent's Secret holds a renewed token", func() (bool, error) {
		return token() != before, nil
	})
	h.cluster(t, h.pullMember.Name, "showing the renewed token's later expiry, and reporting with it", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Phase == vidrav1alpha1.ClusterEngaged && vc.Status.Identity != nil && vc.Status.Identity.ExpiresAt != nil &&
			vc.Status.Identity.ExpiresAt.After(expiresBefore)
	})
	h.stopAgent(t)
	h.startAgent(t, "")
}

// testRefusedToken: the hub refuses the agent (its ServiceAccount was deleted on the
// hub); the VidraCluster says so, not only the agent's log. Enrolling again fixes it.
func testRefusedToken(t *testing.T, h *pullHub) {
	ctx := context.Background()
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = pull.Namespace(h.pullMember.Name), pull.AgentName
	if err := h.admin.Delete(ctx, sa); err != nil {
		t.Fatal(err)
	}
	vc := h.cluster(t, h.pullMember.Name, "Unreachable: the hub refuses the agent", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Phase == vidrav1alpha1.ClusterUnreachable
	})
	if !strings.Contains(vc.Status.Message, "refuses the agent") {
		t.Fatalf("the VidraCluster does not say the hub refuses the agent: %q", vc.Status.Message)
	}
	h.stopAgent(t)
	if _, err := pull.Enroll(ctx, h.admin, h.pullMember.Client, h.enrollment); err != nil {
		t.Fatal(err)
	}
	h.startAgent(t, "")
	h.cluster(t, h.pullMember.Name, "engaged again after enrolling again", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Phase == vidrav1alpha1.ClusterEngaged
	})
}

// testPullUnenroll: unenroll removes the agent and everything of it from both sides;
// what was delivered stays on the member, as for a push cluster.
func testPullUnenroll(t *testing.T, h *pullHub) {
	ctx := context.Background()
	name := h.pullMember.Name
	h.stopAgent(t) // its Deployment goes first
	secret := &corev1.Secret{}
	if err := h.admin.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := pull.Unenroll(ctx, h.admin, h.pullMember.Client, name, testoperator.AgentNamespace, secret); err != nil {
		t.Fatal(err)
	}
	member, hub := h.pullMember.Client, h.admin
	gone := map[string]func() error{
		"the agent's Secret on the member": func() error {
			return member.Get(ctx, client.ObjectKey{Namespace: testoperator.AgentNamespace, Name: vidrav1alpha1.AgentSecretName}, &corev1.Secret{})
		},
		"the agent's ServiceAccount on the member": func() error {
			return member.Get(ctx, client.ObjectKey{Namespace: testoperator.AgentNamespace, Name: pull.AgentName}, &corev1.ServiceAccount{})
		},
		"the delivery identity on the member": func() error {
			return member.Get(ctx, client.ObjectKey{Namespace: identity.DefaultServiceAccount.Namespace, Name: identity.DefaultServiceAccount.Name}, &corev1.ServiceAccount{})
		},
		"Vidra's CRDs on the member": func() error {
			return member.Get(ctx, client.ObjectKey{Name: "vidraresources.infrahub.operators.com"}, &apiextensionsv1.CustomResourceDefinition{})
		},
		"the cluster's namespace on the hub": func() error {
			return hub.Get(ctx, client.ObjectKey{Name: pull.Namespace(name)}, &corev1.Namespace{})
		},
		"the enrollment Secret": func() error {
			return hub.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: name}, &corev1.Secret{})
		},
		"the VidraCluster": func() error { return hub.Get(ctx, client.ObjectKey{Name: name}, &vidrav1alpha1.VidraCluster{}) },
	}
	for what, get := range gone {
		testfleet.Eventually(t, objectsTimeout, what+" gone", func() (bool, error) {
			err := get()
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}
	agentSelector := client.MatchingLabels{pull.AgentLabel: testoperator.AgentNamespace + "." + pull.AgentName}
	for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
		if err := member.List(ctx, list, agentSelector); err != nil {
			t.Fatal(err)
		}
		if n := countItems(t, list); n > 0 {
			t.Errorf("%d %T of the agent left on the member", n, list)
		}
	}
	// What was delivered stays, as it does when a push cluster is unenrolled.
	if err := member.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "web"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("what was delivered did not stay: %v", err)
	}
}

func countItems(t *testing.T, list client.ObjectList) int {
	t.Helper()
	switch l := list.(type) {
	case *rbacv1.ClusterRoleList:
		return len(l.Items)
	case *rbacv1.ClusterRoleBindingList:
		return len(l.Items)
	case *rbacv1.RoleList:
		return len(l.Items)
	case *rbacv1.RoleBindingList:
		return len(l.Items)
	}
	t.Fatalf("unexpected list %T", list)
	return 0
}
