package infrahubsync_test

import (
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

const namespace = testoperator.Namespace

// fleet is a hub and three members, with Vidra's cluster provider, VidraResource and
// InfrahubSync controllers running in this process. member-1 and member-2 are enrolled;
// member-3 is left for a test to enroll. Every cluster runs the garbage collector, so
// deleting an InfrahubSync really removes its VidraResources.
var fleet *testfleet.Fleet

// registry holds the controllers' metrics.
var registry prometheus.Gatherer

func TestMain(m *testing.M) {
	os.Exit(testoperator.Main(m, testfleet.Options{Members: 3, ControllerManager: true}, testoperator.Options{Unenrolled: 1},
		func(f *testfleet.Fleet, op *testoperator.Operator) { fleet, registry = f, op.Registry }))
}
