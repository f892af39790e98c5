package vidraresource_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

const (
	namespace = testoperator.Namespace
	hubID     = testoperator.HubID
)

// fleet is a hub and two enrolled members, with Vidra's controller and cluster provider
// running in this process against them. The members run the namespace and garbage
// collector controllers, so deleted namespaces really go.
var fleet *testfleet.Fleet

// registry holds the controller's metrics.
var registry prometheus.Gatherer

// watches are the controller's drift watches.
var watches *vidraresource.DriftWatches

// store is the operator's content store.
var store *content.Store

// engaged finds the operator's engaged clusters.
var engaged interface {
	GetCluster(context.Context, multicluster.ClusterName) (cluster.Cluster, error)
}

// limiters are the engaged clusters' rate limiters: they count, and never throttle.
var limiters = &countingLimiters{counts: map[multicluster.ClusterName]*atomic.Int64{}, refused: map[multicluster.ClusterName]*atomic.Bool{}}

// configure counts the engaged clusters' requests. The bundle of real size holds CRDs with
// schemas of megabytes, which a member's API server, with other packages' control planes
// beside it, took over 2 s to apply again and again (the other packages' operators run
// with 2 s); a paused member here is waited for, never timed.
func configure(o *operator.Options) {
	o.ClusterRateLimiter = limiters.forCluster
	o.RequestTimeout = 10 * time.Second
}

func TestMain(m *testing.M) {
	os.Exit(testoperator.Main(m, testfleet.Options{Members: 2, ControllerManager: true}, testoperator.Options{Configure: configure},
		func(f *testfleet.Fleet, op *testoperator.Operator) {
			fleet, registry, watches, store, engaged = f, op.Registry, op.Watches, op.Content, op.Manager
		}))
}

// countingLimiters give each engaged cluster a rate limiter that counts the requests
// passing it; refuse makes a cluster's requests fail before they are sent (the cluster's
// probe passes no limiter, so the cluster stays engaged).
type countingLimiters struct {
	mu      sync.Mutex
	counts  map[multicluster.ClusterName]*atomic.Int64
	refused map[multicluster.ClusterName]*atomic.Bool
}

func (c *countingLimiters) forCluster(name multicluster.ClusterName) flowcontrol.RateLimiter {
	n, refused := c.counter(name)
	return countingLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(), n: n, refused: refused}
}

// refuse fails every request of the operator to cluster name that waits for its limiter,
// until lift is called or the test ends.
func (c *countingLimiters) refuse(t testing.TB, name string) (lift func()) {
	_, refused := c.counter(multicluster.ClusterName(name))
	refused.Store(true)
	lift = func() { refused.Store(false) }
	t.Cleanup(lift)
	return lift
}

// count is how many requests to the cluster have passed its limiters so far.
func (c *countingLimiters) count(name string) int64 {
	n, _ := c.counter(multicluster.ClusterName(name))
	return n.Load()
}

func (c *countingLimiters) counter(name multicluster.ClusterName) (*atomic.Int64, *atomic.Bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts[name] == nil {
		c.counts[name], c.refused[name] = new(atomic.Int64), new(atomic.Bool)
	}
	return c.counts[name], c.refused[name]
}

type countingLimiter struct {
	flowcontrol.RateLimiter
	n       *atomic.Int64
	refused *atomic.Bool
}

func (l countingLimiter) TryAccept() bool {
	l.n.Add(1)
	return true
}

func (l countingLimiter) Accept() { l.n.Add(1) }

func (l countingLimiter) Wait(context.Context) error {
	l.n.Add(1)
	if l.refused.Load() {
		return errRefusedByTest
	}
	return nil
}

var errRefusedByTest = errors.New("request refused by the test")
