package vidraresource_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// A first delivery of many workloads waits for all of them at once (the members run no
// Deployment controller, so these never become available). The status still says so, in
// a message short enough for a condition (the API server refuses one over 32 KiB, and
// with it the whole status), naming the first few and counting the rest, while every
// object's own state is in the inventory.
func TestManyObjectsInProgressAreSummarized(t *testing.T) {
	member := fleet.Members[0]
	const deployments = 400
	var manifest strings.Builder
	for i := range deployments {
		fmt.Fprintf(&manifest, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: a-workload-with-a-descriptive-name-%03d
spec:
  selector: {matchLabels: {app: w%03d}}
  template:
    metadata: {labels: {app: w%03d}}
    spec: {containers: [{name: app, image: registry.example/app:1}]}
`, i, i, i)
	}
	deliver(t, "many-progressing", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "many-progressing"}, manifest.String())
	vr := condition(t, "many-progressing", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing)
	msg := conditionMessage(vr, vidrav1alpha1.ConditionReady)
	if len(msg) > 4096 || !strings.Contains(msg, "a-workload-with-a-descriptive-name-000") || !strings.Contains(msg, "more") {
		t.Errorf("Ready says (%d bytes) %.300q…, want the first few objects named and the rest counted", len(msg), msg)
	}
	inProgress := 0
	for _, m := range vr.Status.ManagedResources {
		if m.Kind == "Deployment" && m.Status == "InProgress" {
			inProgress++
		}
	}
	if inProgress != deployments {
		t.Errorf("%d Deployments InProgress in the inventory, want %d", inProgress, deployments)
	}
}
