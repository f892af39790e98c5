package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/testfleet"
)

// hub is a real kube-apiserver with the generated CRDs installed, shared by the tests of
// this package: CRD validation is the API server's decision, so it is tested there.
var hub *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	fleet, err := testfleet.Start(context.Background(), testfleet.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		return 1
	}
	defer func() {
		if err := fleet.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}()
	hub = fleet.Hub
	return m.Run()
}
