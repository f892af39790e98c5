// Package capi stands in for Cluster API on a test hub: its Cluster CRD (the fields
// Vidra reads), and a Cluster and its kubeconfig Secret as Cluster API writes them.
package capi

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// ClusterGVK is the Cluster the CRD serves.
var ClusterGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}

// CRDDirectory holds the Cluster CRD.
func CRDDirectory() (string, error) {
	root, err := testfleet.ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "internal", "test", "capi", "crds"), nil
}

// HubCRDDirectories are Vidra's CRDs and Cluster API's Cluster, for a hub that serves both.
func HubCRDDirectories() ([]string, error) {
	vidra, err := testfleet.CRDDirectory()
	if err != nil {
		return nil, err
	}
	clusterAPI, err := CRDDirectory()
	if err != nil {
		return nil, err
	}
	return []string{vidra, clusterAPI}, nil
}

// Cluster is a Cluster API Cluster in namespace ns with labels and annotations.
func Cluster(ns, name string, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ClusterGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

// SetPhase writes the Cluster's status.phase, as Cluster API's controller does.
func SetPhase(ctx context.Context, c client.Client, cluster *unstructured.Unstructured, phase string) error {
	if err := unstructured.SetNestedField(cluster.Object, phase, "status", "phase"); err != nil {
		return err
	}
	if err := c.Status().Update(ctx, cluster); err != nil {
		return fmt.Errorf("set phase %s of Cluster %s/%s: %w", phase, cluster.GetNamespace(), cluster.GetName(), err)
	}
	return nil
}

// KubeconfigSecret is the Secret <name>-kubeconfig Cluster API writes beside Cluster
// name: the admin kubeconfig under value.
func KubeconfigSecret(ns, name string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig", Labels: map[string]string{"cluster.x-k8s.io/cluster-name": name}},
		Type:       "cluster.x-k8s.io/secret",
		Data:       map[string][]byte{"value": kubeconfig},
	}
}
