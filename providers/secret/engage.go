package secret

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// engagedCluster is a cluster the manager's controllers work on.
type engagedCluster struct {
	name   multicluster.ClusterName
	secret types.NamespacedName
	hash   string // of the kubeconfig it was built from
	// namespaces are the only namespaces its cache watches; nil: all of them.
	namespaces []string
	server     string // normalised

	cluster cluster.Cluster
	conns   *connTracker
	probe   discovery.ServerVersionInterface
	// heard is when its API server last answered anyone; probedAt when a probe last
	// returned (the probe loop's own).
	heard    *heardFrom
	probedAt time.Time
	// ctx is the cluster's lifetime, handed to the manager on engage: it ends when the
	// cluster is disengaged, which stops every controller's work on it.
	ctx    context.Context
	cancel context.CancelFunc
	// stopped is closed once the cluster's cache and probes have stopped.
	stopped chan struct{}

	// mu guards the observed state below and orders the status writes made from it.
	mu        sync.Mutex
	phase     vidrav1alpha1.ClusterPhase
	version   string
	lastProbe metav1.Time
	failures  int
	// rotationError is why the Secret's current kubeconfig could not replace this one.
	rotationError string
	// policy is the delivery policy of its Secret; policyErr why it does not parse.
	policy    policy.Policy
	policyErr string
	// creds is the identity the cluster is reached with, and its expiry.
	creds credentials
}

// stop cancels the cluster's context and waits for its goroutines, then drops its idle
// connections (its transport is its own, so nothing of it outlives the cluster).
func (ec *engagedCluster) stop() {
	ec.cancel()
	<-ec.stopped
	ec.conns.closeAll()
}

// connect builds a cluster from an accepted kubeconfig, starts its cache and checks that
// its API server answers. The cluster is not engaged yet: the caller engages it, or stops
// it when connect fails. ctx bounds only the checks; the cluster lives until stop.
func (p *Provider) connect(ctx context.Context, name multicluster.ClusterName, secret types.NamespacedName, hash string, cfg *kubeconfig.Config, namespaces []string) (*engagedCluster, error) {
	conn, err := p.dial(name, cfg)
	if err != nil {
		return nil, err
	}
	probe, version, err := p.probeFirst(conn)
	if err != nil {
		conn.conns.closeAll()
		return nil, fmt.Errorf("probe API server %s: %w", cfg.Server, err)
	}
	cl, err := p.newCluster(ctx, name, conn, namespaces)
	if err != nil {
		conn.conns.closeAll()
		return nil, err
	}
	clusterCtx, cancel := context.WithCancel(context.Background())
	ec := &engagedCluster{
		name: name, secret: secret, hash: hash, server: cfg.Server, namespaces: namespaces,
		cluster: cl, conns: conn.conns, probe: probe, heard: conn.heard, probedAt: time.Now(),
		ctx: clusterCtx, cancel: cancel, stopped: make(chan struct{}),
		phase: vidrav1alpha1.ClusterEngaged, version: version, lastProbe: metav1.Now(),
	}
	probesDone := make(chan struct{})
	p.probeEvery(clusterCtx, ec, func() { close(probesDone) })
	go func() {
		defer close(ec.stopped)
		if err := cl.Start(clusterCtx); err != nil {
			p.log.Error(err, "cluster cache stopped", "cluster", name)
		}
		<-probesDone
	}()

	syncCtx, cancelSync := context.WithTimeout(ctx, p.opts.SyncTimeout)
	defer cancelSync()
	if !cl.GetCache().WaitForCacheSync(syncCtx) {
		ec.stop()
		return nil, fmt.Errorf("cache of cluster %s not synced within %v", name, p.opts.SyncTimeout)
	}
	return ec, nil
}

// connection is how the hub reaches one member: its client configuration, the HTTP client
// every client of the cluster shares, its connections and when it last answered.
type connection struct {
	rest  *rest.Config
	http  *http.Client
	conns *connTracker
	heard *heardFrom
}

func (p *Provider) dial(name multicluster.ClusterName, cfg *kubeconfig.Config) (connection, error) {
	restCfg := rest.CopyConfig(cfg.REST)
	// One limiter on the config, so every client built from it shares it: the cache's,
	// and those a reconcile builds for its delivery. From QPS and Burst, client-go would
	// give each REST client (one per kind and client) a bucket of its own.
	restCfg.QPS, restCfg.Burst, restCfg.RateLimiter = -1, 0, p.opts.RateLimiter(name)
	restCfg.UserAgent = "vidra/" + string(name)
	// An own dialer keeps client-go from sharing (and caching forever) the transport, and
	// lets every connection of a disengaged or rotated cluster be closed.
	conns := newConnTracker(net.Dialer{Timeout: p.opts.ProbeTimeout, KeepAlive: 30 * time.Second})
	restCfg.Dial = conns.DialContext
	heard := newHeardFrom()
	restCfg.Wrap(heard.wrap)
	httpClient, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		return connection{}, fmt.Errorf("build HTTP client: %w", err)
	}
	return connection{rest: restCfg, http: httpClient, conns: conns, heard: heard}, nil
}

// probeFirst builds the cluster's probe and asks its version. Reachability first: an
// unreachable cluster costs one probe timeout, nothing more.
func (p *Provider) probeFirst(conn connection) (*discovery.DiscoveryClient, string, error) {
	probeCfg := rest.CopyConfig(conn.rest)
	// The probe says whether the cluster answers: never held back by the operator's own
	// traffic, so --cluster-probe-timeout bounds it.
	probeCfg.RateLimiter = nil
	probeCfg.Timeout = p.opts.ProbeTimeout
	probeHTTP := *conn.http
	probeHTTP.Timeout = p.opts.ProbeTimeout
	probe, err := discovery.NewDiscoveryClientForConfigAndClient(probeCfg, &probeHTTP)
	if err != nil {
		return nil, "", fmt.Errorf("build discovery client: %w", err)
	}
	version, err := probe.ServerVersion()
	if err != nil {
		return nil, "", err
	}
	return probe, version.GitVersion, nil
}

// newCluster builds the cluster with its cache and the controllers' indexes, not started.
func (p *Provider) newCluster(ctx context.Context, name multicluster.ClusterName, conn connection, namespaces []string) (cluster.Cluster, error) {
	cacheOpts := p.opts.Cache
	if len(namespaces) > 0 {
		// Nothing is delivered outside the policy's namespaces, so nothing is watched
		// there either: an identity narrowed to them may not list the others.
		cacheOpts.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
		for _, ns := range namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	cl, err := cluster.New(conn.rest, func(o *cluster.Options) {
		o.Scheme = p.opts.Scheme
		o.HTTPClient = conn.http
		o.MapperProvider = p.mappings.ForCluster
		o.Cache = cacheOpts
		o.Logger = p.log.WithValues("cluster", name)
	})
	if err != nil {
		return nil, fmt.Errorf("build cluster: %w", err)
	}
	p.mu.RLock()
	indexers := append([]index(nil), p.indexers...)
	p.mu.RUnlock()
	for _, idx := range indexers {
		if err := cl.GetFieldIndexer().IndexField(ctx, idx.obj, idx.field, idx.extract); err != nil {
			return nil, fmt.Errorf("index %s: %w", idx.field, err)
		}
	}
	return cl, nil
}
