// Package testoperator runs Vidra in the test process against a testfleet, wired by the
// operator package as the binary is, so controller tests drive the operator users run
// through the hub's API and can read its metrics.
package testoperator

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/operator"
)

// Namespace is the operator's namespace on the hub.
const Namespace = "vidra-system"

// LocalServiceAccount is who bundles for the hub are applied as: bound to cluster-admin,
// as an admin binds it who lets local bundles apply anything (the chart's
// rbac.localApply=broad).
const LocalServiceAccount = "vidra-local"

// HubID is the operator's hub ID.
const HubID = "hub"

// Options change the operator the tests run from the binary's.
type Options struct {
	// Unenrolled is how many of the fleet's last members Main leaves for the tests to
	// enroll.
	Unenrolled int
	// Configure, when set, changes the operator's options as a flag would.
	Configure func(*operator.Options)
	// HubConfig, when set, is how the operator reaches the hub (for example with a token
	// of the chart's ServiceAccount); nil: as the fleet's admin.
	HubConfig *rest.Config
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
	if err := bindLocalServiceAccount(ctx, fleet.Hub.Client); err != nil {
		return nil, err
	}
	op := &Operator{Registry: prometheus.NewRegistry()}
	o := operator.DefaultOptions()
	o.LocalServiceAccount = Namespace + "/" + LocalServiceAccount
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
	hubConfig := fleet.Hub.Config
	if opts.HubConfig != nil {
		hubConfig = opts.HubConfig
	}
	if op.Operator, err = operator.New(ctx, hubConfig, o); err != nil {
		return nil, err
	}
	op.run(ctx, log, "operator stopped")
	return op, nil
}

// run starts the operator until ctx ends; Stopped is closed once it stopped.
func (op *Operator) run(ctx context.Context, log logr.Logger, stoppedWithError string) {
	stopped := make(chan struct{})
	op.Stopped = stopped
	go func() {
		defer close(stopped)
		if err := op.Start(ctx); err != nil {
			log.Error(err, stoppedWithError)
		}
	}()
}

// bindLocalServiceAccount creates LocalServiceAccount and binds it to cluster-admin.
func bindLocalServiceAccount(ctx context.Context, hub client.Client) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: LocalServiceAccount, Namespace: Namespace}}
	if err := hub.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account %s: %w", LocalServiceAccount, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vidra-local-apply"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: LocalServiceAccount, Namespace: Namespace}},
	}
	if err := hub.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind service account %s: %w", LocalServiceAccount, err)
	}
	return nil
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
