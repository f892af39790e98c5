package policy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestHubGuard(t *testing.T) {
	guard := HubGuard{Namespaces: []string{"vidra-system", "vidra-enroll"}}
	obj := func(group, kind, namespace, name string) Object {
		return Object{GVK: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, Namespace: namespace, Name: name}
	}
	tests := []struct {
		name        string
		objects     []Object
		destination string
		refused     string // what the refusal names; "" when allowed
	}{
		{"an ordinary bundle", []Object{obj("", "Namespace", "", "web"), obj("", "ConfigMap", "web", "c"), obj("apps", "Deployment", "web", "d")}, "web", ""},
		{"a Secret in the operator's namespace", []Object{obj("", "Secret", "vidra-enroll", "edge-1")}, "web", "Secret vidra-enroll/edge-1"},
		{"the operator's Namespace itself", []Object{obj("", "Namespace", "", "vidra-system")}, "", "Namespace vidra-system"},
		{"the operator's namespace as destination", []Object{obj("", "ConfigMap", "vidra-system", "c")}, "vidra-system", "destination namespace vidra-system"},
		{"a Lease anywhere", []Object{obj("coordination.k8s.io", "Lease", "default", "vidra-peer-x")}, "", "Lease.coordination.k8s.io default/vidra-peer-x"},
		{"a VidraResource", []Object{obj("infrahub.operators.com", "VidraResource", "", "second-hand")}, "", "VidraResource.infrahub.operators.com second-hand"},
		{"Vidra's CRD", []Object{obj("apiextensions.k8s.io", "CustomResourceDefinition", "", "vidraresources.infrahub.operators.com")}, "", "CustomResourceDefinition.apiextensions.k8s.io vidraresources.infrahub.operators.com"},
		{"another CRD", []Object{obj("apiextensions.k8s.io", "CustomResourceDefinition", "", "widgets.example.com")}, "", ""},
		{"a lookalike namespace", []Object{obj("", "ConfigMap", "vidra-system-2", "c")}, "vidra-system-2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			denied := guard.Check(tt.objects, tt.destination)
			switch {
			case tt.refused == "" && denied != nil:
				t.Errorf("refused: %v", denied)
			case tt.refused != "" && denied == nil:
				t.Errorf("allowed, want %s refused", tt.refused)
			case tt.refused != "" && denied.Object != tt.refused:
				t.Errorf("refused %q, want %q", denied.Object, tt.refused)
			case denied != nil && !strings.Contains(denied.Error(), "hub"):
				t.Errorf("refusal %q does not say it is the hub's", denied)
			}
		})
	}
}

func TestRequesterOf(t *testing.T) {
	if _, ok := RequesterOf(map[string]string{"other": "x"}); ok {
		t.Error("a requester read from annotations that record none")
	}
	who, ok := RequesterOf(map[string]string{
		"vidra.infrahub.operators.com/requested-by":        "alice",
		"vidra.infrahub.operators.com/requested-by-groups": "team-web,cn=ops%2Cou=x%252C,system:authenticated",
	})
	if !ok || who.User != "alice" || strings.Join(who.Groups, "|") != "team-web|cn=ops,ou=x%2C|system:authenticated" {
		t.Errorf("RequesterOf = %+v, %v", who, ok)
	}
}
