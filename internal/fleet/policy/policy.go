// Package policy is a cluster's delivery policy: what the person who enrolled a cluster
// lets the hub deliver there. It is read from the enrollment Secret's annotations, which
// live where hub users who write VidraResources cannot change them, and is checked
// against a whole bundle before any of it reaches the cluster.
package policy

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Policy limits what may be delivered to one cluster. The zero Policy allows everything.
type Policy struct {
	// AllowedNamespaces, when set, are the only namespaces namespaced objects may be in.
	AllowedNamespaces []string
	// AllowedClusterKinds, when set, are the only cluster-scoped kinds allowed. With
	// AllowedNamespaces set and this not, no cluster-scoped kind is allowed but the
	// allowed namespaces themselves.
	AllowedClusterKinds []schema.GroupKind
	// RequireServiceAccount refuses VidraResources without spec.serviceAccountName.
	RequireServiceAccount bool
}

// Restricts says whether the policy limits anything.
func (p Policy) Restricts() bool {
	return p.AllowedNamespaces != nil || p.AllowedClusterKinds != nil || p.RequireServiceAccount
}

// Parse reads a policy from an enrollment Secret's annotations. An annotation that does
// not parse is an error: the cluster then gets nothing (fail closed).
func Parse(annotations map[string]string) (Policy, error) {
	var p Policy
	if v, ok := annotations[vidrav1alpha1.AllowedNamespacesAnnotation]; ok {
		p.AllowedNamespaces = []string{}
		for _, ns := range split(v) {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return Policy{}, fmt.Errorf("%s: %q is not a namespace name: %s", vidrav1alpha1.AllowedNamespacesAnnotation, ns, strings.Join(errs, ", "))
			}
			p.AllowedNamespaces = append(p.AllowedNamespaces, ns)
		}
	}
	if v, ok := annotations[vidrav1alpha1.AllowedClusterKindsAnnotation]; ok {
		p.AllowedClusterKinds = []schema.GroupKind{}
		for _, k := range split(v) {
			gk := schema.ParseGroupKind(k)
			if gk.Kind == "" || strings.ToUpper(gk.Kind[:1]) != gk.Kind[:1] {
				return Policy{}, fmt.Errorf("%s: %q is not Kind.group (Namespace for the core group)", vidrav1alpha1.AllowedClusterKindsAnnotation, k)
			}
			p.AllowedClusterKinds = append(p.AllowedClusterKinds, gk)
		}
	}
	switch v := annotations[vidrav1alpha1.RequireServiceAccountAnnotation]; v {
	case "", "false":
	case "true":
		p.RequireServiceAccount = true
	default:
		return Policy{}, fmt.Errorf("%s: %q is neither true nor false", vidrav1alpha1.RequireServiceAccountAnnotation, v)
	}
	return p, nil
}

func split(v string) []string {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Object is what the policy sees of one object of a bundle: its kind, and its namespace
// once defaulted ("" when cluster-scoped).
type Object struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

func (o Object) String() string {
	if o.Namespace == "" {
		return fmt.Sprintf("%s %s", KindName(o.GVK.GroupKind()), o.Name)
	}
	return fmt.Sprintf("%s %s/%s", KindName(o.GVK.GroupKind()), o.Namespace, o.Name)
}

// DeniedError says which object a policy refuses and by which rule.
type DeniedError struct {
	Object string
	Rule   string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s: %s", e.Object, e.Rule)
}

// Check returns the first object, in the bundle's order, the policy refuses, or nil.
// destination is the VidraResource's destination namespace (where its namespaced objects
// without one go); serviceAccount its spec.serviceAccountName.
func (p Policy) Check(objects []Object, destination, serviceAccount string) *DeniedError {
	if p.RequireServiceAccount && serviceAccount == "" {
		return &DeniedError{Object: "the VidraResource", Rule: "the cluster requires spec.serviceAccountName (" + vidrav1alpha1.RequireServiceAccountAnnotation + ")"}
	}
	if destination != "" && p.AllowedNamespaces != nil && !slices.Contains(p.AllowedNamespaces, destination) {
		return &DeniedError{Object: "destination namespace " + destination, Rule: p.namespacesRule()}
	}
	for _, o := range objects {
		if o.Namespace != "" {
			if p.AllowedNamespaces != nil && !slices.Contains(p.AllowedNamespaces, o.Namespace) {
				return &DeniedError{Object: o.String(), Rule: p.namespacesRule()}
			}
			continue
		}
		gk := o.GVK.GroupKind()
		if gk == (schema.GroupKind{Kind: "Namespace"}) && p.AllowedNamespaces != nil && slices.Contains(p.AllowedNamespaces, o.Name) {
			continue // one of the allowed namespaces itself
		}
		switch {
		case p.AllowedClusterKinds != nil && !slices.Contains(p.AllowedClusterKinds, gk):
			return &DeniedError{Object: o.String(), Rule: fmt.Sprintf("cluster-scoped kinds allowed: %s (%s)", p.kindsRule(), vidrav1alpha1.AllowedClusterKindsAnnotation)}
		case p.AllowedClusterKinds == nil && p.AllowedNamespaces != nil:
			return &DeniedError{Object: o.String(), Rule: "no cluster-scoped kind is allowed beside the allowed namespaces (" + vidrav1alpha1.AllowedClusterKindsAnnotation + " lists those that are)"}
		}
	}
	return nil
}

func (p Policy) namespacesRule() string {
	return fmt.Sprintf("namespaces allowed: %s (%s)", strings.Join(p.AllowedNamespaces, ", "), vidrav1alpha1.AllowedNamespacesAnnotation)
}

func (p Policy) kindsRule() string {
	if len(p.AllowedClusterKinds) == 0 {
		return "none"
	}
	return strings.Join(p.Kinds(), ", ")
}

// KindName spells a kind as the policy does: Kind.group, or Kind for the core group.
func KindName(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

// Kinds returns the allowed cluster-scoped kinds as the annotation spells them.
func (p Policy) Kinds() []string {
	if p.AllowedClusterKinds == nil {
		return nil
	}
	out := make([]string, 0, len(p.AllowedClusterKinds))
	for _, gk := range p.AllowedClusterKinds {
		out = append(out, KindName(gk))
	}
	return out
}
