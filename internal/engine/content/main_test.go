package content_test

import (
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// hub is a real API server: object size limits, preconditions and ConfigMap validation are
// its decisions.
var hub *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{}, func(f *testfleet.Fleet) { hub = f.Hub }))
}
