package inventory

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Vidra's name as a cluster manager (KEP-4322): its ClusterProfiles' spec.clusterManager
// and label, and the access provider they list.
const (
	ClusterManagerName  = "vidra"
	ClusterManagerLabel = "x-k8s.io/cluster-manager"
)

// waitNamespace is how often a profile is tried again while its namespace is missing.
const waitNamespace = time.Minute

// Publisher writes a ClusterProfile in Namespace for each enrolled cluster, so that other
// consumers of the Cluster Inventory API (Kueue's MultiKueue, Argo CD) find Vidra's
// fleet: its labels, Kubernetes version, whether Vidra reaches its control plane, and its
// endpoint and CA under the access provider vidra. No credential is published: a consumer
// gets its own. A cluster Vidra enrolled from a ClusterProfile is not published again.
type Publisher struct {
	// Hub reads VidraClusters and writes the profiles; Profiles reads them (Namespace
	// alone); Secrets reads enrollment Secrets, uncached.
	Hub       client.Client
	Profiles  client.Reader
	Secrets   client.Reader
	Namespace string
	GVK       schema.GroupVersionKind
}

// publishedStatus is the part of a ClusterProfile's status Vidra writes.
type publishedStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Version    struct {
		Kubernetes string `json:"kubernetes,omitempty"`
	} `json:"version,omitempty"`
	AccessProviders []accessProvider `json:"accessProviders,omitempty"`
}

// Reconcile writes the profile of one VidraCluster, or deletes it when the cluster goes.
func (r *Publisher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vc := &vidrav1alpha1.VidraCluster{}
	err := r.Hub.Get(ctx, client.ObjectKey{Name: req.Name}, vc)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("read VidraCluster %s: %w", req.Name, err)
	}
	profile := &unstructured.Unstructured{}
	profile.SetGroupVersionKind(r.GVK)
	perr := r.Profiles.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: req.Name}, profile)
	if client.IgnoreNotFound(perr) != nil {
		return reconcile.Result{}, fmt.Errorf("read ClusterProfile %s/%s: %w", r.Namespace, req.Name, perr)
	}
	exists := perr == nil
	if exists && profile.GetLabels()[ClusterManagerLabel] != ClusterManagerName {
		return reconcile.Result{}, nil // another cluster manager's: never touched
	}
	if apierrors.IsNotFound(err) || !vc.DeletionTimestamp.IsZero() || vc.Labels[vidrav1alpha1.InventoryLabel] == ClusterProfileInventory {
		if !exists {
			return reconcile.Result{}, nil
		}
		err := r.Hub.Delete(ctx, profile, client.Preconditions{UID: ptr.To(profile.GetUID())})
		if client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("delete ClusterProfile %s/%s: %w", r.Namespace, req.Name, err)
		}
		return reconcile.Result{}, nil
	}
	if !exists {
		profile, err = r.create(ctx, vc)
		if apierrors.IsNotFound(err) {
			// The namespace is not there (yet): not an error of the cluster's.
			log.FromContext(ctx).Info("no ClusterProfile is written until the namespace exists", "namespace", r.Namespace)
			return reconcile.Result{RequeueAfter: waitNamespace}, nil
		}
		if err != nil {
			return reconcile.Result{}, err
		}
	} else if err := r.label(ctx, profile, vc); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.writeStatus(ctx, profile, vc)
}

// profileLabels are the cluster's labels and Vidra's as its cluster manager.
func profileLabels(vc *vidrav1alpha1.VidraCluster) map[string]string {
	labels := maps.Clone(vc.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ClusterManagerLabel] = ClusterManagerName
	return labels
}

func (r *Publisher) create(ctx context.Context, vc *vidrav1alpha1.VidraCluster) (*unstructured.Unstructured, error) {
	profile := &unstructured.Unstructured{}
	profile.SetGroupVersionKind(r.GVK)
	profile.SetNamespace(r.Namespace)
	profile.SetName(vc.Name)
	profile.SetLabels(profileLabels(vc))
	// Gone with its cluster, should the operator miss the deletion.
	profile.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: vidrav1alpha1.GroupVersion.String(), Kind: "VidraCluster", Name: vc.Name, UID: vc.UID}})
	profile.Object["spec"] = map[string]any{"displayName": vc.Name, "clusterManager": map[string]any{"name": ClusterManagerName}}
	if err := r.Hub.Create(ctx, profile); err != nil {
		return nil, fmt.Errorf("create ClusterProfile %s/%s: %w", r.Namespace, vc.Name, err) // wraps NotFound: no namespace
	}
	return profile, nil
}

func (r *Publisher) label(ctx context.Context, profile *unstructured.Unstructured, vc *vidrav1alpha1.VidraCluster) error {
	want := profileLabels(vc)
	if maps.Equal(profile.GetLabels(), want) {
		return nil
	}
	before := profile.DeepCopy()
	profile.SetLabels(want)
	if err := r.Hub.Patch(ctx, profile, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("label ClusterProfile %s/%s: %w", r.Namespace, vc.Name, err)
	}
	return nil
}

// writeStatus writes what Vidra sees of the cluster, when it changed.
func (r *Publisher) writeStatus(ctx context.Context, profile *unstructured.Unstructured, vc *vidrav1alpha1.VidraCluster) error {
	var current publishedStatus
	if raw, ok := profile.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &current)
	}
	want := publishedStatus{Conditions: slices.Clone(current.Conditions)}
	want.Version.Kubernetes = vc.Status.KubernetesVersion
	meta.SetStatusCondition(&want.Conditions, controlPlaneCondition(vc))
	access, err := r.access(ctx, vc)
	if err != nil {
		return err
	}
	want.AccessProviders = access
	if reflect.DeepEqual(current, want) {
		return nil
	}
	written, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
	if err != nil {
		return err
	}
	// Only what Vidra writes: properties, say, are left as they are.
	status, _ := profile.Object["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	for _, k := range []string{"conditions", "version", "accessProviders"} {
		if v, ok := written[k]; ok {
			status[k] = v
		} else {
			delete(status, k)
		}
	}
	profile.Object["status"] = status
	if err := r.Hub.Status().Update(ctx, profile); err != nil {
		return fmt.Errorf("write status of ClusterProfile %s/%s: %w", r.Namespace, vc.Name, err)
	}
	return nil
}

// controlPlaneCondition is ControlPlaneHealthy as Vidra's probes see it.
func controlPlaneCondition(vc *vidrav1alpha1.VidraCluster) metav1.Condition {
	c := metav1.Condition{Type: controlPlaneHealthy, Status: metav1.ConditionUnknown, Reason: string(vc.Status.Phase), Message: vc.Status.Message}
	switch vc.Status.Phase {
	case vidrav1alpha1.ClusterEngaged:
		c.Status, c.Message = metav1.ConditionTrue, "Vidra's probes reach the API server"
	case vidrav1alpha1.ClusterUnreachable:
		c.Status = metav1.ConditionFalse
	case "":
		c.Reason = "NotObserved"
	}
	return c
}

// access is the cluster's endpoint and CA, from its enrollment Secret's kubeconfig; none
// for a pull cluster, which the hub does not reach.
func (r *Publisher) access(ctx context.Context, vc *vidrav1alpha1.VidraCluster) ([]accessProvider, error) {
	ref := vc.Status.SecretRef
	if ref == nil || vc.Status.Server == "" {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	cfg, err := clientcmd.Load(secret.Data[vidrav1alpha1.KubeconfigKey])
	if err != nil {
		return nil, nil //nolint:nilerr // the provider shows why the kubeconfig does not load
	}
	ctxCfg := cfg.Contexts[cfg.CurrentContext]
	if ctxCfg == nil || cfg.Clusters[ctxCfg.Cluster] == nil {
		return nil, nil
	}
	c := cfg.Clusters[ctxCfg.Cluster]
	return []accessProvider{{Name: ClusterManagerName, Cluster: clientcmdv1.Cluster{
		Server: c.Server, TLSServerName: c.TLSServerName, CertificateAuthorityData: c.CertificateAuthorityData,
	}}}, nil
}
