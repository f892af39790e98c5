package v1alpha1_test

import (
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// hub is a real kube-apiserver with the generated CRDs installed, shared by the tests of
// this package: CRD validation is the API server's decision, so it is tested there.
var hub *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{}, func(f *testfleet.Fleet) { hub = f.Hub }))
}
