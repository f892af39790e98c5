package vidraresource_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func TestBundleIsAppliedToItsMemberAndShownInStatus(t *testing.T) {
	member := fleet.Members[0]
	deliver(t, "web", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "web"}, `
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: web-secret}
stringData: {token: t}
`)
	vr := ready(t, "web")
	if vr.Status.Cluster != member.Name || vr.Status.DeployState != vidrav1alpha1.StateSucceeded || vr.Status.LastSyncTime == nil {
		t.Errorf("status: cluster %q state %q lastSync %v", vr.Status.Cluster, vr.Status.DeployState, vr.Status.LastSyncTime)
	}
	// The missing destination namespace was created and is owned like the rest.
	if vr.Status.ResourceCount != 3 || len(vr.Status.ManagedResources) != 3 {
		t.Errorf("managedResources = %+v, want the namespace, the ConfigMap and the Secret", vr.Status.ManagedResources)
	}
	cm := &corev1.ConfigMap{}
	if !exists(t, member, cm, "web", "web-config") || !owned(t, cm, "hub/web") || cm.Data["greeting"] != "hello" {
		t.Errorf("ConfigMap on %s: %v %v", member.Name, cm.Labels, cm.Annotations)
	}
	ns := &corev1.Namespace{}
	if !exists(t, member, ns, "", "web") || !owned(t, ns, "hub/web") {
		t.Errorf("destination namespace not created and owned: %v", ns.Annotations)
	}
	if exists(t, fleet.Members[1], &corev1.ConfigMap{}, "web", "web-config") {
		t.Error("the bundle reached the other member")
	}
}

func TestCRDThatExistsOnlyOnTheMemberAndItsResources(t *testing.T) {
	member := fleet.Members[1]
	deliver(t, "gadgets", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "default"}, `
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g1}
spec: {size: 2}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`)
	ready(t, "gadgets")
	g := &unstructured.Unstructured{}
	g.SetAPIVersion("example.com/v1")
	g.SetKind("Gadget")
	if !exists(t, member, g, "default", "g1") || !owned(t, g, "hub/gadgets") {
		t.Errorf("Gadget on %s: %v", member.Name, g.GetAnnotations())
	}
}

// TestEmptyDestinationIsTheHubItself: as in the original Vidra, no destination (or
// https://kubernetes.default.svc) means the cluster the operator runs in.
func TestEmptyDestinationIsTheHubItself(t *testing.T) {
	deliver(t, "at-home", vidrav1alpha1.Destination{Server: vidrav1alpha1.LocalClusterServer, Namespace: "default"}, cmManifest("at-home"))
	vr := ready(t, "at-home")
	if vr.Status.Cluster != "local" {
		t.Errorf("status.cluster = %q, want local", vr.Status.Cluster)
	}
	cm := &corev1.ConfigMap{}
	if !exists(t, fleet.Hub, cm, "default", "at-home") || !owned(t, cm, "hub/at-home") {
		t.Errorf("ConfigMap on the hub: %v", cm.Annotations)
	}
}
