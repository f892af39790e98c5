package vidraresource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.test}
spec:
  group: example.test
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// widgetCRDv2 serves a second version beside v1 (the versions list ends widgetCRD).
const widgetCRDv2 = widgetCRD + `  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

func customResource(apiVersion, kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u
}

// TestBrandNewAPIGroupOnAMemberConverges delivers, as a new user would, a CRD of an API
// group the member has never served together with a custom resource of it; then a second
// version of that CRD with a resource of the new version; then, from another bundle, a CRD
// of the same group. Every step converges, and each custom resource is in the inventory.
func TestBrandNewAPIGroupOnAMemberConverges(t *testing.T) {
	member := fleet.Members[0]
	deliver(t, "widgets", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "shared-ns"}, widgetCRD+`
---
apiVersion: example.test/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {size: 3}
`)
	vr := ready(t, "widgets")
	if !exists(t, member, customResource("example.test/v1", "Widget"), "default", "w1") {
		t.Fatal("Widget w1 was not created on the member")
	}
	if !inInventory(vr, "Widget", "default", "w1") {
		t.Errorf("w1 is not in the inventory: %+v", vr.Status.ManagedResources)
	}

	// A second version, and a resource of it.
	updateSpec(t, "widgets", func(vr *vidrav1alpha1.VidraResource) {
		vr.Spec.Manifest = widgetCRDv2 + `
---
apiVersion: example.test/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {size: 3}
---
apiVersion: example.test/v2
kind: Widget
metadata: {name: w2}
spec: {size: 5}
`
	})
	vr = ready(t, "widgets")
	if !exists(t, member, customResource("example.test/v2", "Widget"), "shared-ns", "w2") {
		t.Fatal("Widget w2 (example.test/v2) was not created on the member")
	}
	if !inInventory(vr, "Widget", "shared-ns", "w2") {
		t.Errorf("w2 is not in the inventory: %+v", vr.Status.ManagedResources)
	}

	// Another bundle brings another kind of the group the member now serves.
	deliver(t, "gizmos", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "default"}, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.test}
spec:
  group: example.test
  names: {kind: Gizmo, plural: gizmos, singular: gizmo}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: example.test/v1
kind: Gizmo
metadata: {name: g1}
spec: {size: 1}
`)
	vr = ready(t, "gizmos")
	if !exists(t, member, customResource("example.test/v1", "Gizmo"), "", "g1") {
		t.Fatal("Gizmo g1 was not created on the member")
	}
	if !inInventory(vr, "Gizmo", "", "g1") {
		t.Errorf("g1 is not in the inventory as cluster-scoped: %+v", vr.Status.ManagedResources)
	}
}

// TestCRDWhoseNamesAreRefusedStallsAtOnce: a CRD the API server will never establish (its
// kind is already another CRD's in the group) is reported at once, naming the CRD and the
// API server's reason, instead of after a timeout, and its custom resources are not
// applied.
func TestCRDWhoseNamesAreRefusedStallsAtOnce(t *testing.T) {
	member := fleet.Members[1]
	deliver(t, "sprockets", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "default"}, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.refused.test}
spec:
  group: refused.test
  names: {kind: Sprocket, plural: sprockets}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`)
	ready(t, "sprockets")
	start := time.Now()
	deliver(t, "sprockets-again", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "default"}, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprocketz.refused.test}
spec:
  group: refused.test
  names: {kind: Sprocket, plural: sprocketz}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: after-the-refused-crd}
`)
	vr := condition(t, "sprockets-again", vidrav1alpha1.ConditionStalled, "True", vidrav1alpha1.ReasonApplyFailed)
	msg := conditionMessage(vr, vidrav1alpha1.ConditionStalled)
	if !strings.Contains(msg, "sprocketz.refused.test") || !strings.Contains(msg, "names not accepted") {
		t.Errorf("Stalled message = %q, want the CRD and why its names are refused", msg)
	}
	// The default CRD wait is 30s: a stall reported before it shows it was not waited for.
	if waited := time.Since(start); waited >= 30*time.Second {
		t.Errorf("the refused CRD was reported after %v, as a timeout", waited)
	}
	if exists(t, member, customResource("v1", "ConfigMap"), "default", "after-the-refused-crd") {
		t.Error("objects after the refused CRD were applied")
	}
	testfleet.Eventually(t, 10*time.Second, "a Warning Event on sprockets-again", func() (bool, error) {
		return hasEvent(context.Background(), "sprockets-again", vidrav1alpha1.ReasonApplyFailed, "names not accepted")
	})
}

func inInventory(vr *vidrav1alpha1.VidraResource, kind, namespace, name string) bool {
	for _, m := range vr.Status.ManagedResources {
		if m.Kind == kind && m.Namespace == namespace && m.Name == name {
			return true
		}
	}
	return false
}
