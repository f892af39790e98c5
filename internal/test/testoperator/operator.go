// Package testoperator runs Vidra in the test process against a testfleet, wired by the
// operator package as the binary is, so controller tests drive the operator users run
// through the hub's API and can read its metrics.
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/operator"
)

// Namespace is the operator's namespace on the hub.
const Namespace = "vidra-system"

// HubID is the operator's hub ID.
const HubID = "hub"

// Options change the operator the tests run from the binary's.
type Options struct {
	// Unenrolled is how many of the fleet's last members Main leaves for the tests to
	// enroll.
	Unenrolled int
	// Configure, when set, changes the operator's options as a flag would.
	Configure func(*operator.Options)
}

// Operator is Vidra running in the test process.
type Operator struct {
	*operator.Operator
	// Registry holds the operator's metrics.
	Registry *prometheus.Registry
	// Stopped is closed when the manager has stopped after ctx ended.
	Stopped <-chan struct{}
}

// Start creates the operator's namespace on the hub and runs the operator, wired as the
// binary wires it, until ctx ends. What differs from the binary's defaults suits a test:
// no endpoints are served, every namespace is Namespace, the hub ID is HubID, probes and
// requests are quick, and the metrics go to a registry of the operator's own.
func Start(ctx context.Context, fleet *testfleet.Fleet, opts Options) (*Operator, error) {
	log, err := testfleet.Logger()
	if err != nil {
		return nil, err
	}
	if err := fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", Namespace, err)
	}
	op := &Operator{Registry: prometheus.NewRegistry()}
	o := operator.DefaultOptions()
	o.Logger, o.Metrics = log, op.Registry
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.WebhookBindAddress = "0", "0", "0"
	o.LeaderElectionNamespace, o.ClusterSecretNamespace, o.ContentNamespace, o.InfrahubSecretNamespace = Namespace, Namespace, Namespace, Namespace
	o.HubID = HubID
	o.ClusterProbeInterval = time.Second
	o.RequestTimeout, o.InfrahubTimeout = 2*time.Second, 2*time.Second
	o.MaxConcurrentReconciles, o.MaxConcurrentSyncs = 4, 4
	o.ContentGracePeriod = time.Minute
	// A test may run the operator again after stopping it, as a restarted pod would.
	o.SkipControllerNameValidation = true
	if opts.Configure != nil {
		opts.Configure(&o)
	}
	if op.Operator, err = operator.New(ctx, fleet.Hub.Config, o); err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	op.Stopped = stopped
	go func() {
		defer close(stopped)
		if err := op.Start(ctx); err != nil {
			log.Error(err, "operator stopped")
		}
	}()
	return op, nil
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
