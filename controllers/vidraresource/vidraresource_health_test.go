package vidraresource_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// TestReadyWaitsForEveryObjectToBeCurrent: nothing runs pods here, so a Deployment stays
// in progress until its status is written as a kubelet and controller would. Its
// inventory entry says why it is in progress, and nothing once it is Current.
func TestReadyWaitsForEveryObjectToBeCurrent(t *testing.T) {
	member := fleet.Members[1]
	deliver(t, "app", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "default"}, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec: {containers: [{name: app, image: registry.example/app:1}]}
`)
	vr := condition(t, "app", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionReady); !strings.Contains(msg, "Deployment default/app") {
		t.Errorf("Ready message %q does not name the Deployment", msg)
	}
	if vr.Status.DeployState != vidrav1alpha1.StateRunning {
		t.Errorf("DeployState = %q while progressing", vr.Status.DeployState)
	}
	if m := vr.Status.ManagedResources; len(m) != 1 || m[0].Status != "InProgress" || m[0].Message == "" {
		t.Errorf("inventory = %+v, want the Deployment InProgress with why", m)
	}

	d := &appsv1.Deployment{}
	exists(t, member, d, "default", "app")
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "NewReplicaSetAvailable"},
			{Type: appsv1.DeploymentAvailable, Status: "True", Reason: "MinimumReplicasAvailable"},
		},
	}
	if err := member.Client.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if m := ready(t, "app").Status.ManagedResources; len(m) != 1 || m[0].Status != "Current" || m[0].Message != "" {
		t.Errorf("inventory = %+v, want the Deployment Current, with no message", m)
	}
}

// TestObjectsAreJudgedAsTheApplyReturnedThem: the health check reads none of the objects
// a delivery just applied, so a first delivery costs about one request per object (the
// apply), not two. The count leaves room for the namespace and the cluster's own
// traffic meanwhile, not for a read of each object.
func TestObjectsAreJudgedAsTheApplyReturnedThem(t *testing.T) {
	member := fleet.Members[1]
	const objects = 100
	before := limiters.count(member.Name)
	deliver(t, "judged-as-applied", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "judged-as-applied"}, configMaps("judged", objects))
	vr := ready(t, "judged-as-applied")
	passed := limiters.count(member.Name) - before
	t.Logf("%d requests for %d objects", passed, objects)
	if passed < objects || passed > objects+objects/5 {
		t.Fatalf("%d requests to %s delivered %d new objects: want one apply each and a few more, not a read of each", passed, member.Name, objects)
	}
	listed := 0
	for _, m := range vr.Status.ManagedResources {
		if m.Status != "Current" || m.Message != "" {
			t.Errorf("%s %s is %s (%q), want Current with no message", m.Kind, m.Name, m.Status, m.Message)
		}
		if m.Kind == "ConfigMap" {
			listed++
		}
	}
	if listed != objects {
		t.Errorf("the inventory lists %d ConfigMaps, want %d", listed, objects)
	}
}
