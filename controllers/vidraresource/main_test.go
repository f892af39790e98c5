package vidraresource_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/testfleet"
	"github.com/vidra-operator/vidra/providers/secret"
)

const (
	namespace = "vidra-system"
	hubID     = "hub"
)

// fleet is a hub and two enrolled members, with Vidra's controller and cluster provider
// running in this process against them. The members run the namespace and garbage
// collector controllers, so deleted namespaces really go.
var fleet *testfleet.Fleet

// registry holds the controller's metrics.
var registry = prometheus.NewRegistry()

// watches are the controller's drift watches.
var watches *vidraresource.DriftWatches

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	if fleet, err = testfleet.Start(ctx, testfleet.Options{Members: 2, ControllerManager: true}); err != nil {
		fmt.Fprintln(os.Stderr, "start fleet:", err)
		return 1
	}
	defer func() { _ = fleet.Stop() }()
	stopped, err := startOperator(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start operator:", err)
		return 1
	}
	if err := enrollMembers(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "enroll members:", err)
		return 1
	}
	code := m.Run()
	cancel()
	<-stopped
	return code
}

func startOperator(ctx context.Context) (<-chan struct{}, error) {
	log, err := testfleet.Logger()
	if err != nil {
		return nil, err
	}
	scheme, err := testfleet.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	provider, err := secret.New(log.WithName("cluster-provider"), secret.Options{
		Namespace: namespace, Scheme: scheme, Metrics: prometheus.NewRegistry(), ProbeInterval: time.Second,
		Cache: cache.Options{DefaultLabelSelector: labels.SelectorFromSet(labels.Set{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue})},
	})
	if err != nil {
		return nil, err
	}
	mgr, err := mcmanager.New(fleet.Hub.Config, provider, manager.Options{
		Scheme: scheme, Logger: log, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	watches = vidraresource.NewDriftWatches(log.WithName("drift"), hubID)
	metrics, err := vidraresource.NewMetrics(registry)
	if err != nil {
		return nil, err
	}
	r := &vidraresource.Reconciler{
		Metrics:        metrics,
		Hub:            mgr.GetLocalManager().GetClient(),
		HubReader:      mgr.GetLocalManager().GetAPIReader(),
		Manager:        mgr,
		Resolver:       destination.Resolver{Fleet: provider},
		HubID:          hubID,
		ResyncInterval: 10 * time.Minute,
		Recorder:       mgr.GetLocalManager().GetEventRecorder("vidra"),
		Watches:        watches,
		RequestTimeout: 2 * time.Second,
	}
	if err := r.SetupWithManager(4); err != nil {
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

// enrollMembers enrolls member-1 and member-2 under their own names and waits until both
// are engaged.
func enrollMembers(ctx context.Context) error {
	for _, m := range fleet.Members {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: namespace, Labels: map[string]string{vidrav1alpha1.ClusterLabel: m.Name}},
			Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: m.Kubeconfig},
		}
		if err := fleet.Hub.Client.Create(ctx, s); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range fleet.Members {
		for {
			vc := &vidrav1alpha1.VidraCluster{}
			err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: m.Name}, vc)
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
