// Package pull is what the hub and the agent of a pull cluster agree on: the cluster's
// namespace on the hub, which holds everything its agent may read and nothing else; the
// agent's identity there and its RBAC; the heartbeat the agent writes; and the Secret on
// the member in which the agent finds its hub.
//
// A namespace per cluster, rather than RBAC that names each bundle, is what lets an
// agent watch its bundles with one request: RBAC authorizes a list or a watch of a set
// of names only one name at a time. The hub's own authorizer then keeps every agent to
// its cluster, with no webhook in the path, and unenrolling deletes one namespace.
package pull

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

const (
	// AgentName names the agent's ServiceAccount, Role, RoleBinding and heartbeat Lease
	// in its cluster's namespace on the hub, and its ServiceAccount on the member.
	AgentName = "vidra-agent"
	// HubInfoName is the ConfigMap, in each pull cluster's namespace, in which the
	// operator tells the agent the hub's ID (under HubIDKey): the agent owns objects in the
	// hub's name, so a cluster moved between push and pull keeps its objects' owners.
	HubInfoName = "vidra-hub"
	// HubIDKey holds the hub's ID in HubInfoName.
	HubIDKey = "hubID"

	// CapabilitiesName is the ConfigMap, in each pull cluster's namespace, in which its
	// agent reports what the member is (the hub has no connection to it to ask): its
	// Kubernetes version under KubeVersionKey, and the API versions and kinds it serves,
	// one a line, under APIVersionsKey. A HelmSync renders for the member from it.
	CapabilitiesName = "vidra-agent-capabilities"
	// KubeVersionKey holds the member's Kubernetes version in CapabilitiesName.
	KubeVersionKey = "kubeVersion"
	// APIVersionsKey holds the member's API versions and kinds in CapabilitiesName.
	APIVersionsKey = "apiVersions"

	// NamespacePrefix begins the name of every pull cluster's namespace on the hub.
	NamespacePrefix = "vidra-pull-"
	// ClusterLabel on a pull cluster's namespace names its cluster.
	ClusterLabel = "vidra.infrahub.operators.com/pull-cluster"

	// VersionAnnotation on the heartbeat Lease is the agent's version.
	VersionAnnotation = "vidra.infrahub.operators.com/agent-version"
	// KubernetesVersionAnnotation on the heartbeat Lease is the member's Kubernetes version.
	KubernetesVersionAnnotation = "vidra.infrahub.operators.com/kubernetes-version"
	// TokenExpiresAnnotation on the heartbeat Lease is when the token the agent uses on
	// the hub expires (RFC 3339).
	TokenExpiresAnnotation = "vidra.infrahub.operators.com/agent-token-expires-at"
)

// Namespace is the namespace on the hub of the pull cluster named cluster. A name too
// long for a namespace keeps its first characters and gets 8 hex digits of its SHA-256,
// so it stays unique.
func Namespace(cluster string) string {
	ns := NamespacePrefix + cluster
	if len(ns) <= validation.DNS1123LabelMaxLength {
		return ns
	}
	sum := sha256.Sum256([]byte(cluster))
	return strings.TrimRight(ns[:54], "-") + "-" + hex.EncodeToString(sum[:])[:8]
}

// AgentUser is the user name of the agent of cluster on the hub.
func AgentUser(cluster string) string {
	return "system:serviceaccount:" + Namespace(cluster) + ":" + AgentName
}

// OperatorRoleSuffix ends the name of the ClusterRole (the chart's, named after the
// operator's ServiceAccount) that enrollment binds the operator to in each pull
// cluster's namespace: the operator writes the content and its ID there, and may write
// ConfigMaps and Secrets in no other namespace than its own.
const OperatorRoleSuffix = "-pull"

// HubObjects are what enrollment creates on the hub for a pull cluster, namespace first:
// the agent's ServiceAccount, its Role and RoleBinding, and its heartbeat Lease, and the
// operator's (its ServiceAccount is operator) RoleBinding, and the ConfigMap of the
// member's capabilities. The agent may read the cluster's bundles and the content they
// name (Secrets, and the ConfigMaps an earlier version copied it into: the namespace
// holds nothing else the agent could read), write only
// their status, renew its own heartbeat and its own token, and report what its member
// serves; nothing outside the namespace, and no spec.
func HubObjects(cluster string, operator types.NamespacedName) []client.Object {
	ns := Namespace(cluster)
	labels := map[string]string{ClusterLabel: cluster}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	}
	group := vidrav1alpha1.GroupVersion.Group
	return []client.Object{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}},
		&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(AgentName)},
		&rbacv1.Role{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "Role"), ObjectMeta: meta(AgentName), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{group}, Resources: []string{"vidrabundles"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{group}, Resources: []string{"vidrabundles/status"}, Verbs: []string{"get", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{CapabilitiesName}, Verbs: []string{"update"}},
			{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, ResourceNames: []string{AgentName}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{AgentName}, Verbs: []string{"create"}},
		}},
		&rbacv1.RoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "RoleBinding"), ObjectMeta: meta(AgentName),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AgentName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: AgentName}}},
		&coordinationv1.Lease{TypeMeta: typeMeta(coordinationv1.SchemeGroupVersion.String(), "Lease"), ObjectMeta: meta(AgentName)},
		&corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: meta(CapabilitiesName)},
		&rbacv1.RoleBinding{TypeMeta: typeMeta(rbacv1.SchemeGroupVersion.String(), "RoleBinding"), ObjectMeta: meta("vidra-operator"),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: operator.Name + OperatorRoleSuffix},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: operator.Namespace, Name: operator.Name}}},
	}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
