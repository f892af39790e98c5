// Package identity is the scoped identity the hub uses on a member: a ServiceAccount with
// RBAC that allows what the person who enrolled the cluster chose, and short-lived tokens
// for it from the member's TokenRequest API. kubectl vidra enroll creates it with the
// user's own credentials, which never leave their machine; the operator renews its token
// with the token itself.
package identity

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// Label marks every object of an identity on the member with the identity's name
// (namespace.name of its ServiceAccount), so that a narrower enrollment or an unenroll
// finds all of them.
const Label = "vidra.infrahub.operators.com/identity"

// CreatedNamespaceAnnotation marks a namespace that enrollment created, so that unenroll
// removes it; a namespace that was there before is never deleted.
const CreatedNamespaceAnnotation = "vidra.infrahub.operators.com/created-by-enroll"

// PolicyFromEnrollAnnotation marks an enrollment Secret's delivery policy that enrollment
// set to match a narrowed identity, so that enrolling again with a wider one removes it,
// and only it.
const PolicyFromEnrollAnnotation = "vidra.infrahub.operators.com/policy-from-enroll"

// FieldOwner is the field manager of the identity's objects on the member.
const FieldOwner = "kubectl-vidra"

// DefaultServiceAccount is the identity's ServiceAccount unless one is named.
var DefaultServiceAccount = types.NamespacedName{Namespace: "vidra-system", Name: "vidra"}

// Spec is what an identity may do on its member.
type Spec struct {
	ServiceAccount types.NamespacedName
	// Namespaces, when set, are the only namespaces it may manage objects in; otherwise
	// it may manage any object, as Argo CD's argocd-manager does.
	Namespaces []string
	// ClusterKinds are the cluster-scoped kinds it may manage when Namespaces is set,
	// each with the resource name discovery gave it.
	ClusterKinds []ClusterKind
}

// ClusterKind is a cluster-scoped kind and its resource.
type ClusterKind struct {
	Kind     schema.GroupKind
	Resource schema.GroupResource
}

// Scoped says whether the identity is narrowed to namespaces.
func (s Spec) Scoped() bool { return s.Namespaces != nil }

// ClusterKindNames spells the cluster-scoped kinds as the delivery policy does.
func (s Spec) ClusterKindNames() []string {
	names := make([]string, 0, len(s.ClusterKinds))
	for _, k := range s.ClusterKinds {
		names = append(names, policy.KindName(k.Kind))
	}
	return names
}

// ParseServiceAccount reads NAMESPACE/NAME.
func ParseServiceAccount(v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok {
		return types.NamespacedName{}, fmt.Errorf("service account %q: want NAMESPACE/NAME", v)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("service account %q: namespace: %s", v, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("service account %q: name: %s", v, strings.Join(errs, "; "))
	}
	sa := types.NamespacedName{Namespace: ns, Name: name}
	if errs := validation.IsValidLabelValue(labelValue(sa)); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("service account %q: namespace and name together must fit a label value (%s)", v, strings.Join(errs, "; "))
	}
	return sa, nil
}

// labelValue names the identity in Label: a label value cannot hold '/'.
func labelValue(sa types.NamespacedName) string { return sa.Namespace + "." + sa.Name }

// roleName is the name of the identity's RBAC objects; the ServiceAccount's namespace and
// name keep two identities on one member apart.
func roleName(sa types.NamespacedName, part string) string {
	return "vidra:" + sa.Namespace + ":" + sa.Name + ":" + part
}

// Objects are the identity's objects on the member, namespaces first: the ServiceAccount,
// the RBAC that lets it request its own tokens, and the RBAC of what it may manage.
// Namespaces it needs that do not exist yet are created by Apply, not listed here.
func (s Spec) Objects() []client.Object {
	sa := s.ServiceAccount
	meta := func(namespace, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{Label: labelValue(sa)}}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	everything := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}

	objs := []client.Object{
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(sa.Namespace, sa.Name)},
		// The identity renews its own token, and may request no other.
		&rbacv1.Role{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "Role"), ObjectMeta: meta(sa.Namespace, roleName(sa, "token")),
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{sa.Name}, Verbs: []string{"create"}}}},
		&rbacv1.RoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "RoleBinding"), ObjectMeta: meta(sa.Namespace, roleName(sa, "token")),
			RoleRef: ref("Role", roleName(sa, "token")), Subjects: subject},
	}
	if !s.Scoped() {
		return append(objs,
			&rbacv1.ClusterRole{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRole"), ObjectMeta: meta("", roleName(sa, "manage")),
				Rules: append(everything, rbacv1.PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"get"}})},
			&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRoleBinding"), ObjectMeta: meta("", roleName(sa, "manage")),
				RoleRef: ref("ClusterRole", roleName(sa, "manage")), Subjects: subject})
	}

	// One ClusterRole of everything, bound in each namespace only: a RoleBinding grants a
	// ClusterRole's rules inside its own namespace (the namespace object included).
	// Reading namespaces, names and labels only, lets the operator watch the Namespace
	// objects a bundle carries.
	objs = append(objs,
		&rbacv1.ClusterRole{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRole"), ObjectMeta: meta("", roleName(sa, "namespace")), Rules: everything},
		&rbacv1.ClusterRole{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRole"), ObjectMeta: meta("", roleName(sa, "read-namespaces")),
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRoleBinding"), ObjectMeta: meta("", roleName(sa, "read-namespaces")),
			RoleRef: ref("ClusterRole", roleName(sa, "read-namespaces")), Subjects: subject})
	for _, ns := range s.Namespaces {
		objs = append(objs, &rbacv1.RoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "RoleBinding"), ObjectMeta: meta(ns, roleName(sa, "namespace")),
			RoleRef: ref("ClusterRole", roleName(sa, "namespace")), Subjects: subject})
	}
	if len(s.ClusterKinds) > 0 {
		byGroup := map[string][]string{}
		for _, k := range s.ClusterKinds {
			byGroup[k.Resource.Group] = append(byGroup[k.Resource.Group], k.Resource.Resource)
		}
		var rules []rbacv1.PolicyRule
		for _, g := range slices.Sorted(maps.Keys(byGroup)) {
			resources := byGroup[g]
			slices.Sort(resources)
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: slices.Compact(resources), Verbs: []string{"*"}})
		}
		objs = append(objs,
			&rbacv1.ClusterRole{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRole"), ObjectMeta: meta("", roleName(sa, "cluster-kinds")), Rules: rules},
			&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "ClusterRoleBinding"), ObjectMeta: meta("", roleName(sa, "cluster-kinds")),
				RoleRef: ref("ClusterRole", roleName(sa, "cluster-kinds")), Subjects: subject})
	}
	return objs
}

// NeededNamespaces are the namespaces the identity's objects live in, in order.
func (s Spec) NeededNamespaces() []string {
	out := []string{s.ServiceAccount.Namespace}
	for _, ns := range s.Namespaces {
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
