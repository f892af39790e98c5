package history_test

import (
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// hub is a real API server: the revisions and the index's watch are the server's.
var hub *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{}, func(f *testfleet.Fleet) { hub = f.Hub }))
}
