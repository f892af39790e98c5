package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
)

// target is the cluster a VidraResource's objects go to, with a client that reads
// from its API server (decisions are made on current objects, not a cache) and that
// impersonates the VidraResource's service account when it names one.
type target struct {
	name    multicluster.ClusterName
	cluster cluster.Cluster
	client  client.Client
}

// errClusterNotEngaged: the destination is known but not engaged (yet).
var errClusterNotEngaged = errors.New("cluster is not engaged")

func (r *Reconciler) target(ctx context.Context, vr *vidrav1alpha1.VidraResource) (*target, error) {
	name, err := r.Resolver.Resolve(vr.Spec.Destination)
	if err != nil {
		return nil, err
	}
	cl, err := r.Manager.GetCluster(ctx, name)
	if err != nil {
		if errors.Is(err, multicluster.ErrClusterNotFound) {
			return &target{name: name}, fmt.Errorf("cluster %q: %w", name, errClusterNotEngaged)
		}
		return &target{name: name}, fmt.Errorf("cluster %q: %w", name, err)
	}
	timeout := r.RequestTimeout
	if timeout == 0 {
		timeout = requestTimeout
	}
	httpClient := cl.GetHTTPClient()
	cfg := rest.CopyConfig(cl.GetConfig())
	if user := r.applyAs(vr, name); user != "" {
		// Impersonate over the cluster's own transport: its connections are reused.
		httpClient = &http.Client{
			Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{UserName: user}, httpClient.Transport),
			Timeout:   timeout,
		}
	} else if name == destination.LocalCluster {
		return &target{name: name}, errNoLocalServiceAccount
	} else {
		copied := *httpClient
		copied.Timeout = timeout
		httpClient = &copied
	}
	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: cl.GetScheme(), Mapper: cl.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("client for cluster %q: %w", name, err)
	}
	return &target{name: name, cluster: cl, client: c}, nil
}

// applyAs is the user a VidraResource's objects are applied as on the cluster, "" for
// the cluster's own identity: its spec.serviceAccountName in the destination namespace
// (default "default"), else on the hub the local ServiceAccount. On the hub the
// operator's own identity never applies a bundle: its rights are the operator's.
func (r *Reconciler) applyAs(vr *vidrav1alpha1.VidraResource, name multicluster.ClusterName) string {
	sa := types.NamespacedName{Namespace: vr.Spec.Destination.Namespace, Name: vr.Spec.ServiceAccountName}
	if sa.Namespace == "" {
		sa.Namespace = "default"
	}
	if sa.Name == "" {
		if name != destination.LocalCluster || r.LocalServiceAccount.Name == "" {
			return ""
		}
		sa = r.LocalServiceAccount
	}
	return "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
}

// errNoLocalServiceAccount: a bundle for the hub names no ServiceAccount, and the
// operator has none for such bundles.
var errNoLocalServiceAccount = errors.New("a bundle for the hub is applied as a ServiceAccount, never as the operator: set spec.serviceAccountName, or run the operator with --local-service-account (chart value localCluster.serviceAccount)")

// requestTimeout is the default bound of one request to a destination.
const requestTimeout = 30 * time.Second

// A VidraResource whose destination is not engaged looks again after destinationRetry at
// first, then backs off to maxDestinationRetry: one naming a cluster that never comes
// costs little. A cluster enrolled or engaged meanwhile requeues it at once
// (resourcesOfCluster).
const (
	destinationRetry    = 10 * time.Second
	maxDestinationRetry = 5 * time.Minute
)

// destinationBackoff is how soon to look again at a VidraResource whose destination has
// been missing for waited: half of that, within bounds.
func destinationBackoff(waited time.Duration) time.Duration {
	return min(max(waited/2, destinationRetry), maxDestinationRetry)
}

// findDestination finds the cluster the bundle goes to, and names it in the status.
func (r *Reconciler) findDestination(ctx context.Context, d *delivery) *outcome {
	dest, err := r.target(ctx, d.vr)
	if dest != nil {
		d.vr.Status.Cluster = destination.Label(dest.name)
	}
	switch {
	case errors.Is(err, errNoLocalServiceAccount):
		markStalled(d.vr, vidrav1alpha1.ReasonPolicyDenied, err.Error())
		return stop(ctrl.Result{}, nil)
	case err != nil:
		var waited time.Duration
		if c := meta.FindStatusCondition(d.vr.Status.Conditions, vidrav1alpha1.ConditionReady); c != nil && c.Reason == vidrav1alpha1.ReasonClusterNotFound {
			waited = time.Since(c.LastTransitionTime.Time)
		}
		markNotReady(d.vr, vidrav1alpha1.ReasonClusterNotFound, err.Error())
		return stop(ctrl.Result{RequeueAfter: destinationBackoff(waited)}, nil)
	}
	d.dest = dest
	return nil
}

// placement is how a bundle meets its destination: the objects read to place it, which
// the apply does not read again, and the destination namespace it does not declare but
// needs (joins), which the apply creates, or only joins as one of its owners.
type placement struct {
	seen  []*metav1.PartialObjectMetadata
	joins string
}

// withDestinationNamespace adds the destination namespace to the bundle when it is
// missing on the destination (or Vidra already manages it) and the bundle does not declare
// it, so it is created and owned like any other object. A namespace that exists and that
// Vidra does not manage is used as it is. The namespace it read is in the placement, so
// the apply does not read it again.
func (r *Reconciler) withDestinationNamespace(ctx context.Context, dest *target, vr *vidrav1alpha1.VidraResource, objects []*unstructured.Unstructured) ([]*unstructured.Unstructured, placement, error) {
	ns := vr.Spec.Destination.Namespace
	if ns == "" {
		return objects, placement{}, nil
	}
	for _, o := range objects {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" && o.GetName() == ns {
			return objects, placement{}, nil
		}
	}
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	ref := inventory.Ref{GVK: existing.GroupVersionKind(), Name: ns}
	n := &unstructured.Unstructured{}
	n.SetGroupVersionKind(ref.GVK)
	n.SetName(ns)
	// A namespace Vidra manages is in the drift watch's cache: no read. Seen stale, it
	// costs the apply a retry, never a wrong write (every write has a precondition).
	// Absent from a synced cache, it is missing or not Vidra's: the apply creates it, or
	// finds it is not Vidra's and uses it as it is (remembered, so it is read next time).
	// A service account (every bundle for the hub is applied as one) may not be allowed to
	// create it, nor an identity narrowed to namespaces to watch them all: then it is read
	// first.
	var err error
	cached, inCache := r.Watches.Cached(ctx, dest, ref)
	switch {
	case inCache:
		existing = cached
	case r.applyAs(vr, dest.name) == "" && !r.namespacesNarrowed(dest) && !r.sharedApplyOf(dest.name).isUnmanaged(ns) && r.Watches.Synced(ctx, dest, vr.Name, ref.GVK):
		return append([]*unstructured.Unstructured{n}, objects...), placement{joins: ns}, nil
	default:
		err = dest.client.Get(ctx, client.ObjectKey{Name: ns}, existing)
	}
	p := placement{joins: ns}
	switch {
	case err == nil && !ownership.IsManaged(existing):
		return objects, placement{}, nil
	case err == nil:
		p.seen = append(p.seen, existing)
	case apierrors.IsForbidden(err):
		// An impersonated service account may not read namespaces: use the namespace as
		// it is, and let the apply say so if it is missing.
		return objects, placement{}, nil
	case !apierrors.IsNotFound(err):
		return nil, placement{}, fmt.Errorf("look up destination namespace %s: %w", ns, err)
	}
	return append([]*unstructured.Unstructured{n}, objects...), p, nil
}
