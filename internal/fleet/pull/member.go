package pull

import (
	"maps"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
)

// AgentLabel marks every object of the agent on its member, so that unenroll finds them.
const AgentLabel = "vidra.infrahub.operators.com/agent"

// Keys of the agent's Secret (vidrav1alpha1.AgentSecretName) besides the hub's kubeconfig
// and the cluster's name.
const (
	// DeliveryAccountKey is the member's ServiceAccount (NAMESPACE/NAME) the agent applies
	// as: the identity enrollment narrowed.
	DeliveryAccountKey = "deliveryServiceAccount"
	// SecretHubIDKey caches the hub's ID, so that an agent restarted while its hub is down
	// owns its objects in the same name.
	SecretHubIDKey = "hubID"
	// NamespacesKey lists, comma-separated, the namespaces the agent was given rights in
	// (--namespaces), when it was narrowed: it reads only there. Enrollment writes it; the
	// policy annotations, which the member's administrators may change, do not widen it.
	NamespacesKey = "namespaces"
)

// Agent is the agent's identity on its member. It never applies a bundle as itself: it
// impersonates Delivery, the identity enrollment narrowed to what the person who enrolled
// the cluster chose (--namespaces, --cluster-kinds), exactly as a push hub would act as
// it. Its own rights are its copies of the bundles (VidraResources), its namespace (its
// hub Secret, content, history, leases), KubeVirt's VMs for rollouts, and reading what
// Delivery may manage, for drift and health.
type Agent struct {
	// Namespace is the agent's namespace, which holds its Secret, content and history.
	Namespace string
	// Delivery is the identity the agent applies as.
	Delivery identity.Spec
}

// ServiceAccount is the agent's own ServiceAccount.
func (a Agent) ServiceAccount() types.NamespacedName {
	return types.NamespacedName{Namespace: a.Namespace, Name: AgentName}
}

// Objects are the agent's RBAC and ServiceAccount on the member (Delivery's are
// identity.Spec's own objects).
func (a Agent) Objects() []client.Object {
	sa := a.ServiceAccount()
	labels := map[string]string{AgentLabel: sa.Namespace + "." + sa.Name}
	meta := func(namespace, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	rbac := rbacv1.SchemeGroupVersion.String()
	name := "vidra:agent:" + sa.Namespace + ":" + sa.Name
	where := deliveryRules()
	cluster := a.clusterRules(where)
	delivery := a.Delivery.ServiceAccount
	objs := []client.Object{
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(sa.Namespace, sa.Name)},
		&rbacv1.ClusterRole{TypeMeta: typeMeta(rbac, "ClusterRole"), ObjectMeta: meta("", name), Rules: cluster},
		&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta(rbac, "ClusterRoleBinding"), ObjectMeta: meta("", name), RoleRef: ref("ClusterRole", name), Subjects: subject},
		&rbacv1.Role{TypeMeta: typeMeta(rbac, "Role"), ObjectMeta: meta(sa.Namespace, name), Rules: []rbacv1.PolicyRule{
			// The content store (Secrets; ConfigMaps where an earlier version kept it),
			// leader election and the history live here, and its way to the hub, the
			// Secret vidrav1alpha1.AgentSecretName, whose token it renews.
			{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"*"}},
			{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"*"}},
			{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"*"}},
		}},
		&rbacv1.RoleBinding{TypeMeta: typeMeta(rbac, "RoleBinding"), ObjectMeta: meta(sa.Namespace, name), RoleRef: ref("Role", name), Subjects: subject},
		// It acts as the delivery identity, and as no one else.
		&rbacv1.Role{TypeMeta: typeMeta(rbac, "Role"), ObjectMeta: meta(delivery.Namespace, name+":impersonate"), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{delivery.Name}, Verbs: []string{"impersonate"}},
		}},
		&rbacv1.RoleBinding{TypeMeta: typeMeta(rbac, "RoleBinding"), ObjectMeta: meta(delivery.Namespace, name+":impersonate"), RoleRef: ref("Role", name+":impersonate"), Subjects: subject},
	}
	if a.Delivery.Scoped() {
		objs = append(objs, &rbacv1.ClusterRole{TypeMeta: typeMeta(rbac, "ClusterRole"), ObjectMeta: meta("", name+":read"),
			Rules: where})
		for _, ns := range a.Delivery.Namespaces {
			objs = append(objs, &rbacv1.RoleBinding{TypeMeta: typeMeta(rbac, "RoleBinding"), ObjectMeta: meta(ns, name+":read"),
				RoleRef: ref("ClusterRole", name+":read"), Subjects: subject})
		}
	}
	return objs
}

// clusterRules are what the agent may do cluster-wide: its VidraResources, Events, and
// where it may deliver (the whole cluster unless its delivery is scoped, then the
// cluster-scoped kinds it may deliver only).
func (a Agent) clusterRules(where []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	group, read := vidrav1alpha1.GroupVersion.Group, []string{"get", "list", "watch"}
	cluster := []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: []string{"vidraresources", "vidraresources/status", "vidraresources/finalizers"}, Verbs: []string{"*"}},
		// Watched by the VidraResource controller, as on a hub; a member holds none.
		{APIGroups: []string{group}, Resources: []string{"vidraclusters", "vidrabundles"}, Verbs: read},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
	}
	if !a.Delivery.Scoped() {
		return append(cluster, where...)
	}
	byGroup := map[string][]string{}
	for _, k := range a.Delivery.ClusterKinds {
		byGroup[k.Resource.Group] = append(byGroup[k.Resource.Group], k.Resource.Resource)
	}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		resources := byGroup[g]
		slices.Sort(resources)
		cluster = append(cluster, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: slices.Compact(resources), Verbs: read})
	}
	return cluster
}

// deliveryRules are what the agent may do where it may deliver: read what it delivers
// (drift, health), roll out its VMs, and apply a bundle that names a ServiceAccount of its
// destination namespace as it, as the delivery identity could itself. Cluster-wide, or in
// each allowed namespace.
func deliveryRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
		// A VM whose restart API is not served restarts by its VMI being deleted.
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstances"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachines/restart"}, Verbs: []string{"update", "put"}},
	}
}
