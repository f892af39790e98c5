// Package testoperator runs Vidra's cluster provider and controllers in the test process
// against a testfleet, so controller tests drive them through the hub's API as users do
// and can read their metrics.
package testoperator

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/infrahubsync"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/controllers/vmrollout"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/history"
	operatorscheme "github.com/vidra-operator/vidra/internal/scheme"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/providers/secret"
)

// Namespace is the operator's namespace on the hub.
const Namespace = "vidra-system"

// HubID is the operator's hub ID.
const HubID = "hub"

// Options choose what runs.
type Options struct {
	// InfrahubSync runs the InfrahubSync controller beside the VidraResource controller.
	InfrahubSync bool
	// InfrahubTimeout bounds each request to Infrahub (default 2s).
	InfrahubTimeout time.Duration
	// VMRollout runs the VirtualMachine rollout controller.
	VMRollout bool
	// Unenrolled is how many of the fleet's last members Main leaves for the tests to
	// enroll.
	Unenrolled int
	// ClusterRateLimiter gives each engaged cluster its rate limiter (none by default).
	ClusterRateLimiter func(multicluster.ClusterName) flowcontrol.RateLimiter
}

// Operator is Vidra running in the test process.
type Operator struct {
	// Registry holds the controllers' metrics.
	Registry *prometheus.Registry
	// Watches are the VidraResource controller's drift watches.
	Watches *vidraresource.DriftWatches
	// Content is the content store of large bundles, in Namespace.
	Content *content.Store
	// Stopped is closed when the manager has stopped after ctx ended.
	Stopped <-chan struct{}
}

// Start creates the operator's namespace on the hub and runs the Secret cluster provider
// and the controllers until ctx ends.
func Start(ctx context.Context, fleet *testfleet.Fleet, opts Options) (*Operator, error) {
	log, err := testfleet.Logger()
	if err != nil {
		return nil, err
	}
	// The operator's own scheme, not the tests' richer one: what works here works in bin/vidra.
	scheme, err := operatorscheme.New()
	if err != nil {
		return nil, err
	}
	if err := fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", Namespace, err)
	}
	provider, err := secret.New(log.WithName("cluster-provider"), secret.Options{
		Namespace: Namespace, Scheme: scheme, Metrics: prometheus.NewRegistry(), ProbeInterval: time.Second,
		RateLimiter: opts.ClusterRateLimiter,
		Cache:       cache.Options{DefaultLabelSelector: labels.SelectorFromSet(labels.Set{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue})},
	})
	if err != nil {
		return nil, err
	}
	mgr, err := mcmanager.New(fleet.Hub.Config, provider, manager.Options{
		Scheme: scheme, Logger: log, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// A test may run the operator again after stopping it, as a restarted pod would.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	op := &Operator{Registry: prometheus.NewRegistry(), Watches: vidraresource.NewDriftWatches(log.WithName("drift"), HubID)}
	metrics, err := vidraresource.NewMetrics(op.Registry)
	if err != nil {
		return nil, err
	}
	local := mgr.GetLocalManager()
	op.Content = &content.Store{Client: local.GetClient(), Reader: local.GetAPIReader(), Namespace: Namespace, Grace: time.Minute}
	r := &vidraresource.Reconciler{
		Content:        op.Content,
		Metrics:        metrics,
		Hub:            local.GetClient(),
		HubReader:      local.GetAPIReader(),
		Manager:        mgr,
		Resolver:       destination.Resolver{Fleet: provider},
		Policies:       provider,
		HubID:          HubID,
		ResyncInterval: 10 * time.Minute,
		Recorder:       local.GetEventRecorder("vidra"),
		Watches:        op.Watches,
		RequestTimeout: 2 * time.Second,
		History:        &history.History{Client: local.GetClient(), Reader: local.GetAPIReader(), Namespace: Namespace},
	}
	if err := r.SetupWithManager(4); err != nil {
		return nil, err
	}
	if opts.InfrahubSync {
		if err := setupInfrahubSync(local, op.Registry, op.Content, opts); err != nil {
			return nil, err
		}
	}
	if opts.VMRollout {
		if err := setupVMRollout(mgr, op.Registry); err != nil {
			return nil, err
		}
	}
	stopped := make(chan struct{})
	op.Stopped = stopped
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return op, nil
}

func setupInfrahubSync(mgr manager.Manager, registry prometheus.Registerer, store *content.Store, opts Options) error {
	metrics, err := infrahubsync.NewMetrics(registry)
	if err != nil {
		return err
	}
	timeout := opts.InfrahubTimeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	r := &infrahubsync.Reconciler{
		Hub:         mgr.GetClient(),
		HubReader:   mgr.GetAPIReader(),
		Namespace:   Namespace,
		HTTPTimeout: timeout,
		Content:     store,
		Recorder:    mgr.GetEventRecorder("vidra"),
		Metrics:     metrics,
	}
	return r.SetupWithManager(mgr, 4)
}

func setupVMRollout(mgr mcmanager.Manager, registry prometheus.Registerer) error {
	metrics, err := vmrollout.NewMetrics(registry)
	if err != nil {
		return err
	}
	r := &vmrollout.Reconciler{
		Hub:      mgr.GetLocalManager().GetClient(),
		Manager:  mgr,
		HubID:    HubID,
		Recorder: mgr.GetLocalManager().GetEventRecorder("vidra"),
		Metrics:  metrics,
	}
	return r.SetupWithManager(mgr, 4)
}

// CreateEnrollments creates the operator's namespace and the labeled kubeconfig Secrets
// that enroll clusters under their own names.
func CreateEnrollments(ctx context.Context, hub *testfleet.Cluster, clusters ...*testfleet.Cluster) error {
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", Namespace, err)
	}
	for _, m := range clusters {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: Namespace, Labels: map[string]string{vidrav1alpha1.ClusterLabel: m.Name}},
			Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: m.Kubeconfig},
		}
		if err := hub.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("enroll %s: %w", m.Name, err)
		}
	}
	return nil
}

// Enroll enrolls clusters under their own names and waits until all are engaged.
func Enroll(ctx context.Context, hub *testfleet.Cluster, clusters ...*testfleet.Cluster) error {
	if err := CreateEnrollments(ctx, hub, clusters...); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range clusters {
		for {
			vc := &vidrav1alpha1.VidraCluster{}
			err := hub.Client.Get(ctx, client.ObjectKey{Name: m.Name}, vc)
			if err == nil && vc.Status.Phase == vidrav1alpha1.ClusterEngaged {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not engaged (last error: %w)", m.Name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// Main runs a test package's tests on a fleet with the operator running and every member
// enrolled: use it from TestMain as os.Exit(testoperator.Main(m, fleetOpts, opts, keep)),
// where keep keeps what the tests need. Everything is stopped when the tests end.
func Main(m interface{ Run() int }, fleetOpts testfleet.Options, opts Options, keep func(*testfleet.Fleet, *Operator)) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fleet, err := testfleet.Start(ctx, fleetOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start fleet:", err)
		return 1
	}
	defer func() {
		if err := fleet.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop fleet:", err)
		}
	}()
	op, err := Start(ctx, fleet, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start operator:", err)
		return 1
	}
	if err := Enroll(ctx, fleet.Hub, fleet.Members[:len(fleet.Members)-opts.Unenrolled]...); err != nil {
		fmt.Fprintln(os.Stderr, "enroll members:", err)
		return 1
	}
	keep(fleet, op)
	code := m.Run()
	cancel()
	<-op.Stopped
	return code
}
