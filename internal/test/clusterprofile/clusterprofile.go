// Package clusterprofile stands in for a cluster manager on a test hub: SIG
// Multicluster's ClusterProfile CRD (the fields Vidra reads), and profiles as a cluster
// manager writes them.
package clusterprofile

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// GVK is the ClusterProfile the CRD serves.
var GVK = schema.GroupVersionKind{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Kind: "ClusterProfile"}

// CRDDirectory holds the ClusterProfile CRD.
func CRDDirectory() (string, error) {
	root, err := testfleet.ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "internal", "test", "clusterprofile", "crds"), nil
}

// Profile is a ClusterProfile in namespace ns, managed by "test-manager".
func Profile(ns, name string, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	_ = unstructured.SetNestedField(u.Object, "test-manager", "spec", "clusterManager", "name")
	return u
}

// Access is an access provider's entry: name, and the cluster's server and CA.
func Access(name, server string, ca []byte) map[string]any {
	cluster := map[string]any{"server": server}
	if len(ca) > 0 {
		cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString(ca)
	}
	return map[string]any{"name": name, "cluster": cluster}
}

// SetStatus writes the profile's status as its cluster manager does: its
// ControlPlaneHealthy condition ("True", "False", or none when "") and access providers.
func SetStatus(ctx context.Context, c client.Client, profile *unstructured.Unstructured, healthy string, providers ...map[string]any) error {
	status := map[string]any{}
	if healthy != "" {
		status["conditions"] = []any{map[string]any{
			"type": "ControlPlaneHealthy", "status": healthy, "reason": "Probed", "message": "control plane probed by the test",
			"lastTransitionTime": "2026-01-01T00:00:00Z",
		}}
	}
	list := make([]any, 0, len(providers))
	for _, p := range providers {
		list = append(list, p)
	}
	status["accessProviders"] = list
	profile.Object["status"] = status
	if err := c.Status().Update(ctx, profile); err != nil {
		return fmt.Errorf("set status of ClusterProfile %s/%s: %w", profile.GetNamespace(), profile.GetName(), err)
	}
	return nil
}

// AdminToken is a token of a cluster admin of member (the ServiceAccount
// kube-system/profile-admin), as a cluster manager hands one to the secretreader
// provider.
func AdminToken(ctx context.Context, member *testfleet.Cluster) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "profile-admin"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "profile-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}}
	for _, o := range []client.Object{sa, binding} {
		if err := member.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create %s on %s: %w", o.GetName(), member.Name, err)
		}
	}
	cs, err := kubernetes.NewForConfig(member.Config)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token of %s/%s on %s: %w", sa.Namespace, sa.Name, member.Name, err)
	}
	return tr.Status.Token, nil
}
