package inventory

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vidra-operator/vidra/internal/fleet/argocd"
)

// ArgoCDInventory is the name of Argo CD's inventory (--cluster-inventory): its
// declarative cluster Secrets.
const ArgoCDInventory = "argocd"

// ArgoCD enrolls the clusters of Argo CD's cluster Secrets in the namespaces its cache
// reads.
type ArgoCD struct {
	// Secrets reads Argo CD's cluster Secrets, in the listed namespaces only.
	Secrets client.Reader
	// Written reads the enrollment Secrets this inventory wrote.
	Written  client.Reader
	Enroller *Enroller
}

// Reconcile enrolls the cluster of one Argo CD cluster Secret as <namespace>.<name> (its
// Argo CD name; the Secret's when that is no cluster name), refuses what would run a
// program for credentials, and lets the cluster go when the Secret goes.
func (r *ArgoCD) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := &corev1.Secret{}
	err := r.Secrets.Get(ctx, req.NamespacedName, s)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.Enroller.Remove(ctx, r.Written, ArgoCDInventory, req.NamespacedName, "")
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("read Argo CD cluster Secret %s: %w", req.NamespacedName, err)
	}
	read, readErr := argocd.Read(s)
	labels := maps.Clone(s.Labels)
	delete(labels, argocd.SecretTypeLabel)
	c := Cluster{Inventory: ArgoCDInventory, Source: req.NamespacedName, Labels: labels, name: argocd.FleetName(s, read)}
	// A cluster renamed in Argo CD is enrolled under its new name alone.
	if err := r.Enroller.Remove(ctx, r.Written, ArgoCDInventory, req.NamespacedName, c.Name()); err != nil {
		return reconcile.Result{}, err
	}
	if readErr != nil {
		return reconcile.Result{}, r.Enroller.refuse(ctx, c, fmt.Sprintf("Argo CD cluster Secret %s: %v", req.NamespacedName, readErr))
	}
	return reconcile.Result{}, r.Enroller.Enroll(ctx, c, read.Kubeconfig)
}
