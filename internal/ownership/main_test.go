package ownership_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/testfleet"
)

// cluster is a real API server: preconditions and conflicts are its decisions.
var cluster *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	fleet, err := testfleet.Start(context.Background(), testfleet.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		return 1
	}
	defer func() { _ = fleet.Stop() }()
	cluster = fleet.Hub
	return m.Run()
}
