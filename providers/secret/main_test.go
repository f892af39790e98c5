package secret_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/providers/secret"
)

// The operator's namespace on the hub, where enrollment Secrets live.
const namespace = "vidra-system"

// testHubID is the hub's ID the provider tells pull clusters' agents.
const testHubID = "hub-under-test"

var (
	fleet    *testfleet.Fleet
	provider *secret.Provider
	metrics  *prometheus.Registry
	// clock is the provider's clock: tests move it ahead to see credentials expire.
	clock = &offsetClock{}
	// seen records the requests a multicluster controller got, per cluster: proof that an
	// engaged cluster reaches Vidra's controllers.
	seen = &requestLog{byCluster: map[multicluster.ClusterName][]types.NamespacedName{}}
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	if fleet, err = testfleet.Start(ctx, testfleet.Options{Members: 3}); err != nil {
		fmt.Fprintln(os.Stderr, "start fleet:", err)
		return 1
	}
	defer func() { _ = fleet.Stop() }()
	if err := fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		fmt.Fprintln(os.Stderr, "create namespace:", err)
		return 1
	}
	stopped, err := startOperator(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start operator:", err)
		return 1
	}
	code := m.Run()
	cancel()
	<-stopped
	return code
}

// startOperator runs a multicluster manager with the provider against the hub, the way
// cmd/vidra wires it, with probes fast enough for tests.
func startOperator(ctx context.Context) (<-chan struct{}, error) {
	log, err := testfleet.Logger()
	if err != nil {
		return nil, err
	}
	scheme, err := testfleet.NewScheme()
	if err != nil {
		return nil, err
	}
	metrics = prometheus.NewRegistry()
	provider, err = secret.New(log.WithName("cluster-provider"), secret.Options{
		Namespace:        namespace,
		Scheme:           scheme,
		ProbeInterval:    300 * time.Millisecond,
		ProbeTimeout:     time.Second,
		UnreachableAfter: 2,
		SyncTimeout:      10 * time.Second,
		Metrics:          metrics,
		// A 10-minute token is renewed after 6 s.
		TokenRenewalPoint: 0.01,
		Clock:             clock,
		// Pull clusters: the hub's ID the agents learn, and a short silence allowed.
		HubID:        testHubID,
		Version:      "v9.9.9",
		AgentTimeout: 2 * time.Second,
		Cache: cache.Options{DefaultLabelSelector: labels.SelectorFromSet(labels.Set{
			vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue,
		})},
	})
	if err != nil {
		return nil, err
	}
	mgr, err := mcmanager.New(fleet.Hub.Config, provider, manager.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	err = mcbuilder.ControllerManagedBy(mgr).
		Named("configmaps").
		For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(false)).
		Complete(mcreconcile.Func(func(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			seen.add(req.ClusterName, req.NamespacedName)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return stopped, nil
}

type requestLog struct {
	mu        sync.Mutex
	byCluster map[multicluster.ClusterName][]types.NamespacedName
}

func (l *requestLog) add(cluster multicluster.ClusterName, key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byCluster[cluster] = append(l.byCluster[cluster], key)
}

func (l *requestLog) has(cluster multicluster.ClusterName, key types.NamespacedName) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.byCluster[cluster] {
		if k == key {
			return true
		}
	}
	return false
}

// offsetClock is the real time moved ahead by an offset a test sets.
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// advance moves the clock ahead by d until the test ends.
func (c *offsetClock) advance(t *testing.T, d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
	t.Cleanup(func() {
		c.mu.Lock()
		c.offset -= d
		c.mu.Unlock()
	})
}
