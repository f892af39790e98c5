package ownership_test

import (
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// cluster is a real API server: preconditions and conflicts are its decisions.
var cluster *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{}, func(f *testfleet.Fleet) { cluster = f.Hub }))
}
