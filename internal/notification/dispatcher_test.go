package notification_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/notification"
	"github.com/vidra-operator/vidra/internal/test/alertreceiver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const namespace = "vidra-system"

// waitFor waits until in received n events, and returns them.
func waitFor(t *testing.T, in *alertreceiver.Receiver, n int) []eventv1.Event {
	t.Helper()
	testfleet.Eventually(t, 20*time.Second, fmt.Sprintf("%d events received", n), func() (bool, error) {
		return len(in.Events()) >= n, nil
	})
	return in.Events()
}

// admin is who the tests' objects were written by, as the chart's requester policy
// stamps it: envtest's admin, who may use every Secret.
var admin = map[string]string{
	vidrav1alpha1.RequestedByAnnotation:       "default",
	vidrav1alpha1.RequestedByGroupsAnnotation: "system:masters",
}

func provider(t *testing.T, name, typ, address string, secret map[string]string, allowed string) {
	t.Helper()
	ctx := context.Background()
	p := &vidrav1alpha1.AlertProvider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: admin},
		Spec:       vidrav1alpha1.AlertProviderSpec{Type: typ, Address: address, Timeout: &metav1.Duration{Duration: time.Second}},
	}
	if secret != nil {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, StringData: secret}
		if allowed != "" {
			s.Annotations = map[string]string{vidrav1alpha1.AllowedURLsAnnotation: allowed}
		}
		if err := hub.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hub.Client.Delete(ctx, s) })
		p.Spec.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: name}
	}
	if err := hub.Client.Create(ctx, p); err != nil {
		t.Fatalf("create AlertProvider %s: %v", name, err)
	}
	t.Cleanup(func() { _ = hub.Client.Delete(ctx, p) })
}

func alert(t *testing.T, name string, spec vidrav1alpha1.AlertSpec) {
	t.Helper()
	ctx := context.Background()
	a := &vidrav1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := hub.Client.Create(ctx, a); err != nil {
		t.Fatalf("create Alert %s: %v", name, err)
	}
	t.Cleanup(func() { _ = hub.Client.Delete(ctx, a) })
}

// start runs a dispatcher until the test ends.
func start(t *testing.T, opts notification.Options) (*notification.Dispatcher, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := notification.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := testfleet.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	opts.Hub, opts.Scheme, opts.Metrics, opts.Log = hub.Client, scheme, m, testr.New(t)
	opts.Gate = credentials.NewGate(hub.Client, hub.Client, namespace)
	opts.Controller = "vidra"
	d := notification.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d, reg
}

func gitSync(name string, labels map[string]string) *vidrav1alpha1.GitSync {
	gs := &vidrav1alpha1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: labels}}
	gs.Status.Source = &vidrav1alpha1.SourceStatus{Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567"}
	return gs
}

func keyOf(name string) client.ObjectKey { return client.ObjectKey{Name: name} }
