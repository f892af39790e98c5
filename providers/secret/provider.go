// Package secret is Vidra's cluster provider for multicluster-runtime: it engages a
// cluster for every kubeconfig Secret labeled for enrollment in the operator's namespace,
// replaces it when the kubeconfig rotates (only once the new one works), disengages it
// when the Secret or its label goes, probes its health, and shows each cluster as a
// VidraCluster. Kubeconfigs are untrusted input: internal/fleet/kubeconfig decides what is
// allowed, and credentials never reach logs, Events or status.
package secret

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/engine/restmapping"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

// Options configure a Provider. Zero values take the defaults noted.
type Options struct {
	// Namespace is the only namespace whose Secrets are read.
	Namespace string
	// Policy says which risky kubeconfig features are allowed (none by default).
	Policy kubeconfig.Policy
	// QPS and Burst limit the requests to each engaged cluster, all of the operator's
	// clients of it together (Burst 100). QPS 0 sets no client-side limit: the cluster's
	// API Priority and Fairness paces the operator, as controller-runtime's default does.
	QPS   float32
	Burst int
	// RateLimiter returns the limiter of an engaged cluster, which every request to it
	// but the health probe passes, whichever client makes it. Default: a token bucket of
	// QPS and Burst, none when QPS is 0.
	RateLimiter func(multicluster.ClusterName) flowcontrol.RateLimiter
	// SyncTimeout bounds the wait for an engaged cluster's cache to sync (30s).
	SyncTimeout time.Duration
	// ProbeInterval and ProbeTimeout pace the health probe of engaged clusters (30s, 5s).
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// UnreachableAfter is how many probes in a row must fail before a cluster is marked
	// Unreachable (3).
	UnreachableAfter int
	// Scheme of engaged clusters' clients and caches; required.
	Scheme *runtime.Scheme
	// Cache is the cache configuration of every engaged cluster, typically selecting only
	// the objects Vidra manages so memory follows what Vidra manages, not cluster size.
	Cache cache.Options
	// MaxConcurrentReconciles is how many Secrets are handled at once (4), so one slow
	// cluster does not delay the enrollment of others.
	MaxConcurrentReconciles int
	// Metrics registers the provider's metrics (controller-runtime's registry).
	Metrics prometheus.Registerer
	// TokenRenewalPoint is the fraction of a token's lifetime after which the operator
	// renews the token of an identity enroll created (2/3).
	TokenRenewalPoint float64
	// Clock tells the time credentials are judged by (the real clock).
	Clock clock.PassiveClock
	// HubID is the hub's ID in owners sets, which the agents of pull clusters own their
	// objects in; Version is the operator's version, which their agents' are compared to.
	HubID   string
	Version string
	// AgentTimeout is how long a pull cluster's agent may stay silent before its cluster is
	// Unreachable (90s).
	AgentTimeout time.Duration
	// Shard, when several replicas split the fleet, says which clusters' VidraClusters
	// this replica writes: every replica engages every cluster, but only a cluster's owner
	// shows it. Nil: this replica writes all of them.
	Shard Shard
}

// Shard tells whether this replica owns a cluster.
type Shard interface {
	Owns(ctx context.Context, name multicluster.ClusterName) bool
}

func (o *Options) defaults() error {
	if o.Namespace == "" {
		return errors.New("cluster provider: no Secret namespace given")
	}
	if o.Scheme == nil {
		return errors.New("cluster provider: no scheme given")
	}
	setDefault(&o.Burst, 100)
	if o.RateLimiter == nil {
		qps, burst := o.QPS, o.Burst
		o.RateLimiter = func(multicluster.ClusterName) flowcontrol.RateLimiter {
			if qps <= 0 {
				return nil
			}
			return flowcontrol.NewTokenBucketRateLimiter(qps, burst)
		}
	}
	setDefault(&o.SyncTimeout, 30*time.Second)
	setDefault(&o.ProbeInterval, 30*time.Second)
	setDefault(&o.ProbeTimeout, 5*time.Second)
	setDefault(&o.UnreachableAfter, 3)
	setDefault(&o.MaxConcurrentReconciles, 4)
	setDefault(&o.TokenRenewalPoint, 2.0/3)
	setDefault(&o.AgentTimeout, 90*time.Second)
	if o.TokenRenewalPoint <= 0 || o.TokenRenewalPoint >= 1 {
		return fmt.Errorf("cluster provider: token renewal point %v is not between 0 and 1", o.TokenRenewalPoint)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Metrics == nil {
		o.Metrics = crmetrics.Registry
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Provider engages the clusters of labeled kubeconfig Secrets. It implements
// multicluster.Provider and multicluster.ProviderRunnable; SetupWithManager wires its
// Secret watch into the hub's manager.
type Provider struct {
	opts    Options
	log     logr.Logger
	metrics *metrics
	// mappings hold the REST mappings of the members' API groups, one of each group
	// for all the members that describe it alike.
	mappings *restmapping.Mappings

	// Set by SetupWithManager.
	hub       client.Client
	hubReader client.Reader // uncached, for reads right after our own writes
	// secretCaches hold only the labeled Secrets of the namespace, one per label.
	secretCaches []cache.Cache
	// leases holds the heartbeat Leases of pull clusters' agents.
	leases client.Reader
	// hubIDPublished holds the pull namespaces that were told the hub's ID.
	hubIDPublished sync.Map
	// beatsSeen holds, per pull namespace, when the hub last saw its heartbeat change.
	beatsSeen sync.Map
	// enrollEvents and renewEvents record Events on enrollment Secrets.
	enrollEvents, renewEvents events.Recorder
	requeue                   chan event.TypedGenericEvent[*corev1.Secret]
	// stopped is closed when Start returns: requeues have no reader then, and one sent
	// with the buffer full would wait for ever (ClusterGained holds the sharding
	// coordinator, and with it the manager's stop).
	stopped chan struct{}

	// aware engages clusters; it is set by Start, and ready is closed then.
	aware multicluster.Aware
	ready chan struct{}

	mu       sync.RWMutex
	clusters map[multicluster.ClusterName]*engagedCluster
	claims   map[types.NamespacedName]claim
	indexers []index
}

// claim is what an enrollment Secret asks for, kept to find duplicates.
type claim struct {
	name    string
	hash    string
	server  string // normalised; empty when the kubeconfig did not parse
	loadErr error  // why the kubeconfig was refused, if it was
	created time.Time
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

// New returns a Provider; call SetupWithManager before the manager starts.
func New(log logr.Logger, opts Options) (*Provider, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	return &Provider{
		opts:     opts,
		log:      log,
		metrics:  m,
		mappings: restmapping.NewMappings(),
		requeue:  make(chan event.TypedGenericEvent[*corev1.Secret], 64),
		ready:    make(chan struct{}),
		stopped:  make(chan struct{}),
		clusters: map[multicluster.ClusterName]*engagedCluster{},
		claims:   map[types.NamespacedName]claim{},
	}, nil
}

// ClusterGained shows a cluster this replica has just come to own: its Secret is
// reconciled again, which writes its VidraCluster.
func (p *Provider) ClusterGained(name multicluster.ClusterName) {
	p.mu.RLock()
	ec := p.clusters[name]
	p.mu.RUnlock()
	if ec == nil {
		return
	}
	s := &corev1.Secret{}
	s.Namespace, s.Name = ec.secret.Namespace, ec.secret.Name
	select {
	case p.requeue <- event.TypedGenericEvent[*corev1.Secret]{Object: s}:
	case <-p.stopped:
	}
}

// Get returns an engaged cluster.
func (p *Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if ec, ok := p.clusters[name]; ok {
		return ec.cluster, nil
	}
	return nil, fmt.Errorf("cluster %q: %w", name, multicluster.ErrClusterNotFound)
}

// IndexField adds an index to every engaged cluster's cache, and to clusters engaged later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	p.indexers = append(p.indexers, index{obj: obj, field: field, extract: extract})
	engaged := make([]*engagedCluster, 0, len(p.clusters))
	for _, ec := range p.clusters {
		engaged = append(engaged, ec)
	}
	p.mu.Unlock()
	var errs []error
	for _, ec := range engaged {
		if err := ec.cluster.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			errs = append(errs, fmt.Errorf("index %s on cluster %s: %w", field, ec.name, err))
		}
	}
	return errors.Join(errs...)
}

// ClusterForServer returns the engaged cluster whose kubeconfig server equals server once
// both are normalised; a server that merely contains another's host never matches.
func (p *Provider) ClusterForServer(server string) (multicluster.ClusterName, bool) {
	normalised, err := kubeconfig.NormalizeServer(server)
	if err != nil {
		return "", false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for name, ec := range p.clusters {
		if ec.server == normalised {
			return name, true
		}
	}
	return "", false
}

// Policy returns the delivery policy of an engaged cluster, or why its Secret's policy
// annotations do not parse; engaged is false when the cluster is not engaged here.
func (p *Provider) Policy(name multicluster.ClusterName) (pol policy.Policy, engaged bool, err error) {
	p.mu.RLock()
	ec := p.clusters[name]
	p.mu.RUnlock()
	if ec == nil {
		return policy.Policy{}, false, nil
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.policyErr != "" {
		return policy.Policy{}, true, errors.New(ec.policyErr)
	}
	return ec.policy, true, nil
}

// WatchedNamespaces are the namespaces the cluster engaged as cl under name watches (its
// policy's, nil for all); current is false when cl is no longer that cluster.
func (p *Provider) WatchedNamespaces(name multicluster.ClusterName, cl cluster.Cluster) (namespaces []string, current bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	ec := p.clusters[name]
	if ec == nil || ec.cluster != cl {
		return nil, false
	}
	return ec.namespaces, true
}

// Start records the Aware that engages clusters and blocks until ctx ends; then every
// engaged cluster is disengaged. The manager calls it.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.aware = aware
	close(p.ready)
	<-ctx.Done()
	close(p.stopped)
	p.mu.Lock()
	engaged := p.clusters
	p.clusters = map[multicluster.ClusterName]*engagedCluster{}
	p.mu.Unlock()
	for _, ec := range engaged {
		ec.stop()
	}
	return nil
}

// waitReady blocks until Start ran, so a Secret seen before the manager finished starting
// is engaged through the right Aware.
func (p *Provider) waitReady(ctx context.Context) error {
	select {
	case <-p.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// secretKeyOf names a Secret.
func secretKeyOf(s *corev1.Secret) types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
}
