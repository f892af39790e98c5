package notification_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// hub is a real API server: the Alerts, AlertProviders and Secrets the dispatcher reads,
// and the SubjectAccessReviews its gate asks, are its.
var hub *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{}, func(f *testfleet.Fleet) {
		hub = f.Hub
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
		if err := hub.Client.Create(context.Background(), ns); err != nil {
			panic(err)
		}
	}))
}
