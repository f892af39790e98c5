package policy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func obj(group, kind, ns, name string) Object {
	return Object{GVK: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, Namespace: ns, Name: name}
}

func TestParseRefusesWhatItCannotRead(t *testing.T) {
	for _, bad := range []map[string]string{
		{vidrav1alpha1.AllowedNamespacesAnnotation: "ok, Not_A_Namespace"},
		{vidrav1alpha1.AllowedClusterKindsAnnotation: "clusterrole.rbac.authorization.k8s.io"},
		{vidrav1alpha1.RequireServiceAccountAnnotation: "yes"},
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%v) accepted it", bad)
		}
	}
	p, err := Parse(map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: " a, b ,", vidrav1alpha1.AllowedClusterKindsAnnotation: "Namespace,ClusterRole.rbac.authorization.k8s.io"})
	if err != nil || strings.Join(p.AllowedNamespaces, ",") != "a,b" || strings.Join(p.Kinds(), ",") != "Namespace,ClusterRole.rbac.authorization.k8s.io" {
		t.Fatalf("Parse: %+v, %v", p, err)
	}
	if p, _ := Parse(nil); p.Restricts() {
		t.Fatal("no annotations restrict something")
	}
}

func TestCheck(t *testing.T) {
	onlyA, _ := Parse(map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: "a"})
	withRoles, _ := Parse(map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: "a", vidrav1alpha1.AllowedClusterKindsAnnotation: "ClusterRole.rbac.authorization.k8s.io"})
	kindsOnly, _ := Parse(map[string]string{vidrav1alpha1.AllowedClusterKindsAnnotation: "Namespace"})
	sa, _ := Parse(map[string]string{vidrav1alpha1.RequireServiceAccountAnnotation: "true"})
	for _, c := range []struct {
		name    string
		p       Policy
		objects []Object
		dest    string
		sa      string
		denied  string // part of the refusal; "" allowed
	}{
		{"in an allowed namespace", onlyA, []Object{obj("", "ConfigMap", "a", "x")}, "a", "", ""},
		{"elsewhere", onlyA, []Object{obj("", "ConfigMap", "a", "x"), obj("", "ConfigMap", "b", "y")}, "a", "", "ConfigMap b/y"},
		{"the destination elsewhere", onlyA, nil, "b", "", "destination namespace b"},
		{"an allowed namespace itself", onlyA, []Object{obj("", "Namespace", "", "a")}, "", "", ""},
		{"another namespace", onlyA, []Object{obj("", "Namespace", "", "b")}, "", "", "Namespace b"},
		{"a cluster-scoped kind", onlyA, []Object{obj("rbac.authorization.k8s.io", "ClusterRole", "", "r")}, "", "", "no cluster-scoped kind"},
		{"a listed cluster-scoped kind", withRoles, []Object{obj("rbac.authorization.k8s.io", "ClusterRole", "", "r")}, "", "", ""},
		{"an unlisted cluster-scoped kind", kindsOnly, []Object{obj("apiextensions.k8s.io", "CustomResourceDefinition", "", "c")}, "", "", "CustomResourceDefinition.apiextensions.k8s.io c"},
		{"the refusal names the kinds allowed", withRoles, []Object{obj("", "Namespace", "", "a"), obj("", "PersistentVolume", "", "pv")}, "", "", "cluster-scoped kinds allowed: ClusterRole.rbac.authorization.k8s.io ("},
		{"kinds only: namespaced objects anywhere", kindsOnly, []Object{obj("", "ConfigMap", "z", "x")}, "z", "", ""},
		{"no service account", sa, nil, "", "", "requires spec.serviceAccountName"},
		{"a service account", sa, nil, "", "deployer", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			denied := c.p.Check(c.objects, c.dest, c.sa)
			switch {
			case c.denied == "" && denied != nil:
				t.Fatalf("refused: %v", denied)
			case c.denied != "" && (denied == nil || !strings.Contains(denied.Error(), c.denied)):
				t.Fatalf("got %v, want a refusal saying %q", denied, c.denied)
			}
		})
	}
}
