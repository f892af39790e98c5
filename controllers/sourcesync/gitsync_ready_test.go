package sourcesync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// deployment is a Deployment manifest of one replica, which no member's controllers
// make available: until a test says it is, kstatus has it InProgress.
func deployment(name string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
spec:
  replicas: 1
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec:
      containers: [{name: app, image: registry.example.com/app:1}]
`
}

// A sync is Ready when its bundle is in effect on every cluster it reaches, not when its
// VidraResources are written: while a member's Deployment is unavailable it says where
// it waits, and why; each member's change of health is seen without reading the source
// again.
func TestASyncIsReadyWhereItsBundleIsInEffect(t *testing.T) {
	const ns = "gs-ready"
	createNamespace(t, ns)
	srv := gitserver.New(t)
	repo := srv.Repo(t, "ready")
	repo.Commit(t, "main", map[string]string{"deploy/web.yaml": deployment("web")}, "web")
	gs := gitSync("ready", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "deploy"
		gs.Spec.Destination = everyMember(ns)
	})
	create(t, gs)

	first, second := fleet.Members[0], fleet.Members[1]
	waitReadiness(t, gs, metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing,
		"Ready on 0 of 2 clusters; waiting for "+first.Name+", "+second.Name+": Deployment "+ns+"/web")
	if !meta.IsStatusConditionTrue(gs.Status.Conditions, vidrav1alpha1.ConditionReconciling) {
		t.Error("not Reconciling while waiting")
	}
	asked := srv.Advertisements("ready")

	makeAvailable(t, first, ns, "web")
	waitReadiness(t, gs, metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing, "Ready on 1 of 2 clusters; waiting for "+second.Name+": ")
	if got, want := *gs.Status.Clusters, (vidrav1alpha1.ClusterCounts{Total: 2, Ready: 1, Progressing: 1}); got != want {
		t.Errorf("status.clusters = %+v, want %+v", got, want)
	}
	makeAvailable(t, second, ns, "web")
	waitReadiness(t, gs, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, "; Ready on 2 of 2 clusters")
	if meta.FindStatusCondition(gs.Status.Conditions, vidrav1alpha1.ConditionReconciling) != nil {
		t.Error("still Reconciling once Ready")
	}
	if n := srv.Advertisements("ready"); n != asked {
		t.Errorf("the members' changes of health asked the remote %d times, want none", n-asked)
	}
}

// A bundle that fails on one cluster makes the sync fail there, by name, and not
// elsewhere; with wait: false the sync is Ready once its VidraResources are written, as
// before.
func TestASyncNamesTheClusterItFailsOn(t *testing.T) {
	const ns = "gs-fails-on"
	createNamespace(t, ns)
	// The second member's admission policy refuses the bundle, as a policy engine would.
	first, second := fleet.Members[0], fleet.Members[1]
	refuseConfigMaps(t, second, ns)
	srv := gitserver.New(t)
	repo := srv.Repo(t, "fails-on")
	repo.Commit(t, "main", map[string]string{"deploy/web.yaml": configMap("web", "v1")}, "web")
	gs := gitSync("fails-on", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "deploy"
		gs.Spec.Destination = everyMember(ns)
	})
	create(t, gs)
	// Failed as soon as the second member refused it; then Ready on the first.
	waitReadiness(t, gs, metav1.ConditionFalse, vidrav1alpha1.ReasonVidraResourceFailed, "; Ready on 1 of 2 clusters")
	if msg := readyMessage(gs); !strings.HasPrefix(msg, "failed on "+second.Name+": ApplyFailed: ") || !strings.Contains(msg, "no ConfigMaps here") {
		t.Errorf("Ready's message %q names neither the cluster nor why", msg)
	}
	if got, want := *gs.Status.Clusters, (vidrav1alpha1.ClusterCounts{Total: 2, Ready: 1, Failed: 1}); got != want {
		t.Errorf("status.clusters = %+v, want %+v", got, want)
	}
	waitValue(t, first, ns, "web", "v1")

	update(t, gs, func() { gs.Spec.Wait = ptr.To(false) })
	waitReadiness(t, gs, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, "as 2 VidraResources")
	if gs.Status.Clusters != nil {
		t.Errorf("status.clusters = %+v with wait: false, want none", *gs.Status.Clusters)
	}
}

// waitReadiness waits until the sync's Ready condition, for its generation, has status
// and reason, and a message holding part.
func waitReadiness(t *testing.T, gs *vidrav1alpha1.GitSync, status metav1.ConditionStatus, reason, part string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for _, vr := range resourcesOf(t, gs) {
				t.Logf("%s on %s: %+v", vr.Name, vr.Status.Cluster, meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady))
			}
			t.Logf("%s: %+v", gs.Name, gs.Status.Conditions)
		}
	}()
	testfleet.Eventually(t, 60*time.Second, gs.Name+" Ready="+string(status)+" "+reason+": …"+part+"…", func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(gs), gs); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(gs.Status.Conditions, vidrav1alpha1.ConditionReady)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == gs.Generation &&
			strings.Contains(c.Message, part), nil
	})
}

// makeAvailable writes the status a Deployment controller would once its one replica
// is available.
func makeAvailable(t testing.TB, m *testfleet.Cluster, ns, name string) {
	t.Helper()
	d := &appsv1.Deployment{}
	testfleet.Eventually(t, 30*time.Second, "Deployment "+ns+"/"+name+" on "+m.Name, func() (bool, error) {
		err := m.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)
		return err == nil, client.IgnoreNotFound(err)
	})
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	if err := m.Client.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// refuseConfigMaps makes m's API server refuse every ConfigMap written to ns, until the
// test ends.
func refuseConfigMaps(t *testing.T, m *testfleet.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "no ConfigMaps here"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := m.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := m.Client.Delete(context.Background(), obj); err != nil {
				t.Error(err)
			}
		})
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	testfleet.Eventually(t, 30*time.Second, "ConfigMaps refused in "+ns+" on "+m.Name, func() (bool, error) {
		err := m.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
	})
}
