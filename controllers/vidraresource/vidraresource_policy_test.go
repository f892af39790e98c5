package vidraresource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// A cluster's delivery policy, set on its enrollment Secret, refuses a whole bundle that
// breaks it, before anything reaches the cluster: Stalled PolicyDenied naming the object
// and the rule, nothing applied; other bundles on that cluster are unaffected; a change
// of the policy is applied at once.
func TestDeliveryPolicyRefusesABundleWhole(t *testing.T) {
	ctx := context.Background()
	m := fleet.Members[1]
	testoperator.SetPolicy(t, fleet.Hub.Client, m.Name, map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: "policy-ok"})
	t.Cleanup(func() { testoperator.SetPolicy(t, fleet.Hub.Client, m.Name, nil) })

	cm := func(ns, name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + "}\ndata: {k: v}\n"
	}
	deliver(t, "policy-allowed", vidrav1alpha1.Destination{Cluster: m.Name, Namespace: "policy-ok"}, cm("policy-ok", "allowed"))
	deliver(t, "policy-elsewhere", vidrav1alpha1.Destination{Cluster: m.Name, Namespace: "policy-ok"},
		cm("policy-ok", "first")+"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: policy-other}\n---\n"+cm("policy-other", "elsewhere"))
	deliver(t, "policy-cluster-kind", vidrav1alpha1.Destination{Cluster: m.Name, Namespace: "policy-ok"},
		cm("policy-ok", "second")+"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: policy-reader}\nrules: []\n")

	ready(t, "policy-allowed")
	vr := condition(t, "policy-elsewhere", vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonPolicyDenied)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionStalled); !strings.Contains(msg, "policy-other") || !strings.Contains(msg, "allowed") {
		t.Errorf("Stalled says %q; want the object and the rule", msg)
	}
	vr = condition(t, "policy-cluster-kind", vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonPolicyDenied)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionStalled); !strings.Contains(msg, "ClusterRole.rbac.authorization.k8s.io policy-reader") {
		t.Errorf("Stalled says %q; want the ClusterRole named", msg)
	}
	testfleet.Eventually(t, 30*time.Second, "a PolicyDenied Warning Event", func() (bool, error) {
		return hasEvent(ctx, "policy-elsewhere", vidrav1alpha1.ReasonPolicyDenied, "policy-other")
	})
	// Refused whole: not even the allowed objects of those bundles were applied.
	for _, name := range []string{"first", "second"} {
		if exists(t, m, &corev1.ConfigMap{}, "policy-ok", name) {
			t.Errorf("ConfigMap %s of a refused bundle was applied", name)
		}
	}
	if exists(t, m, &corev1.Namespace{}, "", "policy-other") || exists(t, m, &rbacv1.ClusterRole{}, "", "policy-reader") {
		t.Error("an object the policy refuses reached the cluster")
	}
	if n := len(vr.Status.ManagedResources); n != 0 {
		t.Errorf("a refused bundle recorded %d objects", n)
	}

	// The person who enrolled the cluster allows the other namespace and the kind.
	testoperator.SetPolicy(t, fleet.Hub.Client, m.Name, map[string]string{
		vidrav1alpha1.AllowedNamespacesAnnotation:   "policy-ok,policy-other",
		vidrav1alpha1.AllowedClusterKindsAnnotation: "ClusterRole.rbac.authorization.k8s.io",
	})
	ready(t, "policy-elsewhere")
	ready(t, "policy-cluster-kind")
	if !exists(t, m, &corev1.ConfigMap{}, "policy-other", "elsewhere") {
		t.Error("the bundle allowed now was not applied")
	}

	// A VidraResource without a service account, where the cluster requires one.
	testoperator.SetPolicy(t, fleet.Hub.Client, m.Name, map[string]string{
		vidrav1alpha1.AllowedNamespacesAnnotation:     "policy-ok,policy-other",
		vidrav1alpha1.AllowedClusterKindsAnnotation:   "ClusterRole.rbac.authorization.k8s.io",
		vidrav1alpha1.RequireServiceAccountAnnotation: "true",
	})
	vr = condition(t, "policy-allowed", vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonPolicyDenied)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionStalled); !strings.Contains(msg, "requires spec.serviceAccountName") {
		t.Errorf("Stalled says %q", msg)
	}
	if !exists(t, m, &corev1.ConfigMap{}, "policy-ok", "allowed") {
		t.Error("a refused VidraResource pruned what it had delivered")
	}
}

// A bundle whose kinds cannot be looked up on its cluster (discovery fails) is neither
// refused nor applied: it shows the failure on its Ready condition, is not Stalled, and
// is delivered once discovery answers again.
func TestAPolicyCheckThatCannotMapIsRetriedNotRefused(t *testing.T) {
	m := fleet.Members[1]
	testoperator.SetPolicy(t, fleet.Hub.Client, m.Name, map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: "policy-unmappable"})
	t.Cleanup(func() { testoperator.SetPolicy(t, fleet.Hub.Client, m.Name, nil) })
	// A group the operator has not looked up on this cluster yet: its first lookup asks
	// the cluster's discovery.
	m.ServeKind(t, "unmappable.test.vidra.io", "Gadget", apiextensionsv1.NamespaceScoped)
	lift := limiters.refuse(t, m.Name)

	deliver(t, "policy-unmappable", vidrav1alpha1.Destination{Cluster: m.Name, Namespace: "policy-unmappable"},
		"apiVersion: unmappable.test.vidra.io/v1\nkind: Gadget\nmetadata: {name: g, namespace: policy-unmappable}\nspec: {size: 1}\n")
	vr := condition(t, "policy-unmappable", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonApplyFailed)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionReady); !strings.Contains(msg, "delivery policy") || !strings.Contains(msg, errRefusedByTest.Error()) {
		t.Errorf("Ready says %q; want the failed lookup named", msg)
	}
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionStalled); msg != "" {
		t.Errorf("a bundle that could not be judged is Stalled: %q", msg)
	}

	lift()
	ready(t, "policy-unmappable")
	gadget := &unstructured.Unstructured{}
	gadget.SetAPIVersion("unmappable.test.vidra.io/v1")
	gadget.SetKind("Gadget")
	if !exists(t, m, gadget, "policy-unmappable", "g") {
		t.Error("the Gadget was not applied once discovery answered")
	}
}
