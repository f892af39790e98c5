package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// TestPullMode: a hub, a pull member and a push member, as a user enrolls them; one
// InfrahubSync's fan-out in two waves; the agent's token refused outside its scope; the
// member's own policy; large bundles and shared objects; the hub's API server paused
// while drift is repaired and the agent restarts; an agent of another version and one
// the hub refuses; and unenroll, which leaves nothing on either side.
func TestPullMode(t *testing.T) {
	h := startPullHub(t)
	pullName, pushName := h.pullMember.Name, h.pushMember.Name

	vc := h.cluster(t, pullName, "engaged in pull mode", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Mode == vidrav1alpha1.ClusterModePull && vc.Status.Phase == vidrav1alpha1.ClusterEngaged && vc.Status.Agent != nil && vc.Status.Agent.LastHeartbeat != nil
	})
	if vc.Status.Agent.Namespace != pull.Namespace(pullName) || vc.Status.Agent.Version == "" || vc.Status.Server != "" || vc.Status.KubernetesVersion != "v1.36.0" {
		t.Fatalf("pull VidraCluster status: %+v", vc.Status)
	}
	h.cluster(t, pushName, "engaged in push mode", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Mode == vidrav1alpha1.ClusterModePush && vc.Status.Phase == vidrav1alpha1.ClusterEngaged
	})
	// No Secret on the hub holds a credential for the pull member.
	enrollment := &corev1.Secret{}
	if err := h.admin.Get(context.Background(), client.ObjectKey{Namespace: testoperator.Namespace, Name: pullName}, enrollment); err != nil {
		t.Fatal(err)
	}
	if len(enrollment.Data) != 0 {
		t.Fatalf("the pull cluster's enrollment Secret holds data: %v", keys(enrollment.Data))
	}

	t.Run("fan-out in two waves", func(t *testing.T) { testPullFanout(t, h) })
	t.Run("agent token refused outside its scope", func(t *testing.T) { testAgentScope(t, h) })
	t.Run("member policy enforced by the agent", func(t *testing.T) { testMemberPolicy(t, h) })
	t.Run("new API group and a large bundle", func(t *testing.T) { testPullBundles(t, h) })
	t.Run("shared objects", func(t *testing.T) { testPullShared(t, h) })
	t.Run("a Helm chart rendered for the pull member", func(t *testing.T) { testPullHelm(t, h) })
	t.Run("sealed content reaches the agent sealed", func(t *testing.T) { testPullSealed(t, h) })
	t.Run("a bundle gone unannounced keeps its copy", func(t *testing.T) { testBundleGoneUnannounced(t, h) })
	t.Run("VM rollout on the member", func(t *testing.T) { testPullVMRollout(t, h) })
	t.Run("autonomy with the hub paused", func(t *testing.T) { testAutonomy(t, h) })
	t.Run("agent of another version", func(t *testing.T) { testVersionSkew(t, h) })
	t.Run("agent renews its token", func(t *testing.T) { testTokenRenewal(t, h) })
	t.Run("token the hub refuses", func(t *testing.T) { testRefusedToken(t, h) })
	t.Run("unenroll leaves nothing", func(t *testing.T) { testPullUnenroll(t, h) })
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// fanoutSync is the InfrahubSync of the fan-out test.
const fanoutSync = "edge-web"

func testPullFanout(t *testing.T, h *pullHub) {
	ctx := context.Background()
	s := infrahubtest.New(infrahubtest.Options{TLS: true, Token: "pull-token"})
	t.Cleanup(s.Close)
	for name, data := range map[string]map[string][]byte{"pull-infrahub-token": {"apiToken": []byte("pull-token")}, "pull-infrahub-ca": {"ca.crt": s.CACertPEM()}} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testoperator.Namespace,
			Annotations: map[string]string{vidrav1alpha1.AllowedURLsAnnotation: s.URL()}}, Data: data}
		if err := h.admin.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	put := func(value string) {
		s.Put("main", infrahubtest.Artifact{ID: "web-edge", Name: "web", Content: appConfigMap("web", value),
			TargetID: "node-edge", TargetLabel: "edge", TargetKind: "InfraSite", DefinitionID: "def-web", DefinitionName: "web-definition"})
	}
	put("v1")
	edge := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}
	ihs := &vidrav1alpha1.InfrahubSync{
		// Who asked, as the chart's admission policy records it once in force (this test
		// does not wait for it): the hub's admin, who may use the Secrets.
		ObjectMeta: metav1.ObjectMeta{Name: fanoutSync, Annotations: map[string]string{
			vidrav1alpha1.RequestedByAnnotation: "default", vidrav1alpha1.RequestedByGroupsAnnotation: "system:masters",
		}},
		Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source: vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: s.URL(), ArtefactName: "web",
				CredentialsSecretRef: &vidrav1alpha1.SecretReference{Namespace: testoperator.Namespace, Name: "pull-infrahub-token"},
				CASecretRef:          &vidrav1alpha1.SecretReference{Namespace: testoperator.Namespace, Name: "pull-infrahub-ca"}},
			Destination: vidrav1alpha1.InfrahubSyncDestination{Destination: vidrav1alpha1.Destination{Namespace: appNamespace, ReconcileOnEvents: true}, ClusterSelector: edge},
			Interval:    &metav1.Duration{Duration: time.Hour},
			Rollout: &vidrav1alpha1.RolloutSpec{
				Strategy: vidrav1alpha1.RolloutProgressive,
				Waves: []vidrav1alpha1.RolloutWave{
					{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}},
					{Name: "main", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "main"}}},
				},
				MaxUnavailable: ptrIntOrString(intstr.FromInt32(1)),
				HealthTimeout:  &metav1.Duration{Duration: 2 * time.Minute},
			},
		},
	}
	if err := h.admin.Create(ctx, ihs); err != nil {
		t.Fatal(err)
	}
	webValue(t, h.pullMember, "v1")
	webValue(t, h.pushMember, "v1")
	byCluster := h.syncResources(t, 2)
	for cluster, vr := range byCluster {
		h.resource(t, vr.Name, "Ready on "+cluster, ready)
	}

	// A new revision: the canary wave (the pull member) first, then the main wave.
	put("v2")
	requestSync(t, h.admin, fanoutSync)
	webValue(t, h.pullMember, "v2")
	webValue(t, h.pushMember, "v2")
	byCluster = h.syncResources(t, 2)
	pullVR := h.resource(t, byCluster[h.pullMember.Name].Name, "Ready with v2", ready)
	pushVR := h.resource(t, byCluster[h.pushMember.Name].Name, "Ready with v2", ready)
	pulledAt, pushedAt := pullVR.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation], pushVR.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation]
	if pulledAt == "" || pushedAt == "" || pulledAt > pushedAt {
		t.Fatalf("the canary wave (pull, updated at %q) did not go before the main wave (push, updated at %q)", pulledAt, pushedAt)
	}
	// The hub's VidraResource shows what the agent reported: the object it owns there.
	if pullVR.Status.Cluster != h.pullMember.Name || pullVR.Status.ResourceCount == 0 || pullVR.Status.Revision < 2 {
		t.Fatalf("pull VidraResource status: cluster %q, %d resources, revision %d", pullVR.Status.Cluster, pullVR.Status.ResourceCount, pullVR.Status.Revision)
	}
	// The hub keeps the pull cluster's history, for kubectl vidra history and rollback.
	var revisions appsv1.ControllerRevisionList
	if err := h.admin.List(ctx, &revisions, client.InNamespace(testoperator.Namespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(pullVR.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(revisions.Items) < 2 {
		t.Fatalf("the hub keeps %d revisions of %s, want 2", len(revisions.Items), pullVR.Name)
	}
	testfleet.Eventually(t, objectsTimeout, "the sync's rollout completed", func() (bool, error) {
		got := &vidrav1alpha1.InfrahubSync{}
		err := h.admin.Get(ctx, client.ObjectKey{Name: fanoutSync}, got)
		return err == nil && got.Status.Rollout != nil && got.Status.Rollout.Phase == vidrav1alpha1.RolloutCompleted, err
	})
}

func ptrIntOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }

// syncResources are the fan-out sync's VidraResources by cluster, once there are n.
func (h *pullHub) syncResources(t *testing.T, n int) map[string]vidrav1alpha1.VidraResource {
	t.Helper()
	out := map[string]vidrav1alpha1.VidraResource{}
	testfleet.Eventually(t, objectsTimeout, fmt.Sprintf("%d VidraResources of %s", n, fanoutSync), func() (bool, error) {
		var list vidrav1alpha1.VidraResourceList
		if err := h.admin.List(context.Background(), &list, client.MatchingLabels{vidrav1alpha1.InfrahubSyncLabel: fanoutSync}); err != nil {
			return false, err
		}
		clear(out)
		for _, vr := range list.Items {
			out[vr.Spec.Destination.Cluster] = vr
		}
		return len(out) == n, nil
	})
	return out
}

// requestSync asks for a sync now.
func requestSync(t *testing.T, hub client.Client, name string) {
	t.Helper()
	ihs := &vidrav1alpha1.InfrahubSync{}
	if err := hub.Get(context.Background(), client.ObjectKey{Name: name}, ihs); err != nil {
		t.Fatal(err)
	}
	before := ihs.DeepCopy()
	if ihs.Annotations == nil {
		ihs.Annotations = map[string]string{}
	}
	ihs.Annotations[vidrav1alpha1.RequestedAtAnnotation] = time.Now().Format(time.RFC3339Nano)
	if err := hub.Patch(context.Background(), ihs, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// testAgentScope asserts, with the agent's own token, that it may read its cluster's
// bundles and content and write their status and its heartbeat, and nothing else.
func testAgentScope(t *testing.T, h *pullHub) {
	ctx := context.Background()
	agent := h.agentHubClient(t)
	ns := pull.Namespace(h.pullMember.Name)

	// Another pull cluster's namespace, with a bundle of its own.
	other := pull.Namespace("other-site")
	if err := h.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}); err != nil {
		t.Fatal(err)
	}
	otherBundle := &vidrav1alpha1.VidraBundle{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "theirs"},
		Spec: vidrav1alpha1.VidraResourceSpec{Manifest: appConfigMap("theirs", "secret-ish")}}
	if err := h.admin.Create(ctx, otherBundle); err != nil {
		t.Fatal(err)
	}
	otherContent := &content.Store{Client: h.admin, Reader: h.admin, Namespace: other}
	otherDigest, err := otherContent.Put(ctx, []byte(appConfigMap("stored", "theirs")))
	if err != nil {
		t.Fatal(err)
	}

	// What it may do, so that what follows is refused for its rights, not its login.
	var bundles vidrav1alpha1.VidraBundleList
	if err := agent.List(ctx, &bundles, client.InNamespace(ns)); err != nil || len(bundles.Items) == 0 {
		t.Fatalf("the agent lists its bundles: %d, %v", len(bundles.Items), err)
	}
	own := bundles.Items[0].DeepCopy()
	if err := agent.Status().Update(ctx, own); err != nil {
		t.Fatalf("the agent writes its bundle's status: %v", err)
	}
	lease := &coordinationv1.Lease{}
	if err := agent.Get(ctx, client.ObjectKey{Namespace: ns, Name: pull.AgentName}, lease); err != nil {
		t.Fatalf("the agent reads its heartbeat: %v", err)
	}

	forbidden := map[string]error{}
	forbidden["read another cluster's bundle"] = agent.Get(ctx, client.ObjectKeyFromObject(otherBundle), &vidrav1alpha1.VidraBundle{})
	forbidden["list another cluster's bundles"] = agent.List(ctx, &vidrav1alpha1.VidraBundleList{}, client.InNamespace(other))
	forbidden["list every bundle"] = agent.List(ctx, &vidrav1alpha1.VidraBundleList{})
	forbidden["read another cluster's content"] = agent.Get(ctx, client.ObjectKey{Namespace: other, Name: content.ChunkName(otherDigest, 0)}, &corev1.Secret{})
	forbidden["read the hub's content store"] = agent.List(ctx, &corev1.SecretList{}, client.InNamespace(testoperator.Namespace))
	forbidden["read the hub's ConfigMaps"] = agent.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(testoperator.Namespace))
	forbidden["read VidraResources"] = agent.List(ctx, &vidrav1alpha1.VidraResourceList{})
	forbidden["read VidraClusters"] = agent.Get(ctx, client.ObjectKey{Name: h.pullMember.Name}, &vidrav1alpha1.VidraCluster{})
	forbidden["read revisions"] = agent.List(ctx, &appsv1.ControllerRevisionList{}, client.InNamespace(testoperator.Namespace))
	forbidden["read Secrets of its namespace"] = agent.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))
	forbidden["read the enrollment Secrets"] = agent.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: h.pushMember.Name}, &corev1.Secret{})
	spec := own.DeepCopy()
	spec.Spec.Manifest = appConfigMap("injected", "by-the-agent")
	forbidden["write its bundle's spec"] = agent.Update(ctx, spec)
	forbidden["patch its bundle's spec"] = agent.Patch(ctx, spec, client.MergeFrom(own))
	forbidden["create a bundle"] = agent.Create(ctx, &vidrav1alpha1.VidraBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "made-up"}})
	forbidden["delete its bundle"] = agent.Delete(ctx, own)
	forbidden["write another cluster's bundle status"] = agent.Status().Update(ctx, otherBundle)
	forbidden["write the hub's ID"] = agent.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "made-up"}})
	forbidden["create a Lease"] = agent.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "made-up"}})
	forbidden["bind itself more rights"] = agent.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "more"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: pull.AgentName}}})
	// Nor may anyone but the operator write its bundles, or anyone but the agent their
	// status, whatever RBAC grants (the admin may do anything).
	forbidden["someone else creates a bundle"] = h.admin.Create(ctx, &vidrav1alpha1.VidraBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-a-person"},
		Spec: vidrav1alpha1.VidraResourceSpec{Manifest: appConfigMap("injected", "by-a-person")}})
	forbidden["someone else writes a bundle's spec"] = h.admin.Patch(ctx, spec, client.MergeFrom(own))
	forbidden["someone else writes a bundle's status"] = h.admin.Status().Update(ctx, own.DeepCopy())
	forbidden["someone else deletes a bundle"] = h.admin.Delete(ctx, own.DeepCopy())
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v (want Forbidden)", what, err)
		}
	}
}

// testMemberPolicy: a bundle outside the member's own policy is refused by the agent,
// which says so on the hub.
func testMemberPolicy(t *testing.T, h *pullHub) {
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: kube-system\ndata:\n  value: x\n"
	h.vidraResource(t, "pull-outside-policy", h.pullMember.Name, manifest, nil)
	vr := h.resource(t, "pull-outside-policy", "PolicyDenied", func(vr *vidrav1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionStalled)
		return c != nil && c.Reason == vidrav1alpha1.ReasonPolicyDenied && c.ObservedGeneration == vr.Generation
	})
	if msg := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionStalled).Message; !strings.Contains(msg, "kube-system") {
		t.Fatalf("PolicyDenied does not name the namespace: %s", msg)
	}
	err := h.pullMember.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: "elsewhere"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the refused object reached the member: %v", err)
	}
}
