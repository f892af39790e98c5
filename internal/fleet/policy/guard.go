package policy

import (
	"slices"
	"strings"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// HubGuard is what no bundle may change on the hub, whatever the identity it is applied
// as may do there: the operator's own namespaces (enrollment Secrets, leases, content,
// history), Vidra's own API (a VidraResource made by a bundle would be a route around
// every check on who delivers where) and Leases (a planted vidra-peer Lease takes a share
// of the fleet from every replica).
type HubGuard struct {
	// Namespaces are the operator's namespaces on the hub.
	Namespaces []string
}

// Check returns the first object, in the bundle's order, the guard refuses, or nil.
// destination is the VidraResource's destination namespace.
func (g HubGuard) Check(objects []Object, destination string) *DeniedError {
	if slices.Contains(g.Namespaces, destination) {
		return &DeniedError{Object: "destination namespace " + destination, Rule: g.namespaceRule()}
	}
	vidraGroup := vidrav1alpha1.GroupVersion.Group
	for _, o := range objects {
		gk := o.GVK.GroupKind()
		switch {
		case gk.Group == vidraGroup:
			return &DeniedError{Object: o.String(), Rule: "Vidra's own objects are never delivered to the hub: create them on the hub yourself, with your own rights"}
		case gk.Group == "apiextensions.k8s.io" && gk.Kind == "CustomResourceDefinition" && strings.HasSuffix(o.Name, "."+vidraGroup):
			return &DeniedError{Object: o.String(), Rule: "Vidra's own CustomResourceDefinitions are never delivered to the hub: the chart installs them"}
		case gk.Group == "coordination.k8s.io" && gk.Kind == "Lease":
			return &DeniedError{Object: o.String(), Rule: "Leases are never delivered to the hub: the operator's replicas coordinate with them"}
		case o.Namespace != "" && slices.Contains(g.Namespaces, o.Namespace):
			return &DeniedError{Object: o.String(), Rule: g.namespaceRule()}
		case o.Namespace == "" && gk.Group == "" && gk.Kind == "Namespace" && slices.Contains(g.Namespaces, o.Name):
			return &DeniedError{Object: o.String(), Rule: g.namespaceRule()}
		}
	}
	return nil
}

func (g HubGuard) namespaceRule() string {
	return "the operator's namespaces on the hub (" + strings.Join(g.Namespaces, ", ") + ") take no bundle: they hold the enrollment Secrets and the operator's own state"
}
