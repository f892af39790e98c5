package inventory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// ClusterAPIInventory is the name of Cluster API's inventory (--cluster-inventory).
const ClusterAPIInventory = "cluster-api"

// ClusterAPIGroupKind is Cluster API's Cluster; its served version is found at start.
var ClusterAPIGroupKind = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}

// Cluster API writes a cluster's admin kubeconfig to the Secret <cluster>-kubeconfig
// beside it, under the key value, once its control plane is up.
const (
	kubeconfigSuffix = "-kubeconfig"
	kubeconfigKey    = "value"
	provisioned      = "Provisioned"
)

// waitProvisioning is how often a cluster whose kubeconfig Secret has not come yet is
// looked at again: Cluster API writes it without a change to the Cluster.
const waitProvisioning = 15 * time.Second

// ClusterAPI enrolls the Cluster API Clusters of the namespaces its cache reads.
type ClusterAPI struct {
	// Clusters reads Clusters (of GVK), in the listed namespaces only, and the
	// enrollment Secrets this inventory wrote.
	Clusters client.Reader
	GVK      schema.GroupVersionKind
	// Secrets reads the clusters' kubeconfig Secrets, uncached: the namespaces hold
	// Cluster API's other Secrets too (CAs, keys), which no cache of Vidra's keeps.
	Secrets  client.Reader
	Enroller *Enroller
}

// Reconcile enrolls one Cluster, shows it as Provisioning until it can, and removes its
// enrollment when it goes (or its namespace is no longer listed).
func (r *ClusterAPI) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.GVK)
	err := r.Clusters.Get(ctx, req.NamespacedName, obj)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.Enroller.Remove(ctx, r.Clusters, ClusterAPIInventory, req.NamespacedName, "")
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("read Cluster %s: %w", req.NamespacedName, err)
	}
	c := Cluster{Inventory: ClusterAPIInventory, Source: req.NamespacedName, Labels: obj.GetLabels()}
	if c.Namespaces, err = identityNamespaces(obj.GetAnnotations()); err != nil {
		return reconcile.Result{}, r.Enroller.refuse(ctx, c, fmt.Sprintf("Cluster %s: %v", req.NamespacedName, err))
	}
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	if !obj.GetDeletionTimestamp().IsZero() {
		phase = "Deleting"
	}
	if phase != provisioned {
		return reconcile.Result{}, r.Enroller.Waiting(ctx, c, fmt.Sprintf("Cluster API Cluster %s is %s; it is enrolled once Provisioned", req.NamespacedName, orUnknown(phase)))
	}
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: req.Namespace, Name: req.Name + kubeconfigSuffix}
	err = r.Secrets.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		why := fmt.Sprintf("Cluster API Cluster %s is Provisioned; its kubeconfig Secret %s is not written yet", req.NamespacedName, key.Name)
		return reconcile.Result{RequeueAfter: waitProvisioning}, r.Enroller.Waiting(ctx, c, why)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("read kubeconfig Secret %s of Cluster %s: %w", key, req.NamespacedName, err)
	}
	admin := secret.Data[kubeconfigKey]
	if len(admin) == 0 {
		return reconcile.Result{}, r.Enroller.refuse(ctx, c, fmt.Sprintf("Secret %s has no key %q holding a kubeconfig", key, kubeconfigKey))
	}
	return reconcile.Result{}, r.Enroller.Enroll(ctx, c, admin)
}

// identityNamespaces are the namespaces an inventory object's annotation narrows its
// cluster's identity to; nil: any.
func identityNamespaces(annotations map[string]string) ([]string, error) {
	ns, ok := annotations[vidrav1alpha1.IdentityNamespacesAnnotation]
	if !ok {
		return nil, nil
	}
	p, err := policy.Parse(map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: ns})
	if err == nil && len(p.AllowedNamespaces) == 0 {
		err = errors.New("names no namespace")
	}
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", vidrav1alpha1.IdentityNamespacesAnnotation, err)
	}
	return p.AllowedNamespaces, nil
}

func orUnknown(phase string) string {
	if strings.TrimSpace(phase) == "" {
		return "not provisioned yet (no status.phase)"
	}
	return phase
}
