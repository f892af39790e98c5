package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/apply"
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
	if sa := vr.Spec.ServiceAccountName; sa != "" {
		ns := vr.Spec.Destination.Namespace
		if ns == "" {
			ns = "default"
		}
		// Impersonate over the cluster's own transport: its connections are reused.
		user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
		httpClient = &http.Client{
			Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{UserName: user}, httpClient.Transport),
			Timeout:   timeout,
		}
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

// requestTimeout is the default bound of one request to a destination.
const requestTimeout = 30 * time.Second

// sharedApply is what the VidraResources this replica reconciles share on one cluster:
// the turns they take at the objects they share (their namespace, above all), and the
// objects as their applies left them, which spares reading them before applying again.
type sharedApply struct {
	latches apply.Latches
	memo    apply.Memo

	mu sync.Mutex
	// unmanaged are destination namespaces found to exist and not be Vidra's.
	unmanaged map[string]bool
}

func (s *sharedApply) isUnmanaged(ns string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unmanaged[ns]
}

func (s *sharedApply) setUnmanaged(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unmanaged == nil {
		s.unmanaged = map[string]bool{}
	}
	s.unmanaged[ns] = true
}

func (r *Reconciler) sharedApplyOf(name multicluster.ClusterName) *sharedApply {
	s, _ := r.shared.LoadOrStore(name, &sharedApply{})
	return s.(*sharedApply)
}
