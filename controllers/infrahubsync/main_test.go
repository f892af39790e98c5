package infrahubsync_test

import (
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
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
	os.Exit(testoperator.Main(m, testfleet.Options{Members: 3, ControllerManager: true}, testoperator.Options{Unenrolled: 1, Configure: smallBounds},
		func(f *testfleet.Fleet, op *testoperator.Operator) { fleet, registry = f, op.Registry }))
}

// The bounds of reading Infrahub the tests run with: small enough for a test to go over
// them cheaply, large enough for every other test (the largest sync lists three
// artifacts; the largest artifact is 5 MiB, 42 MiB of memory decoded).
const (
	maxArtifacts = 40
	maxBytes     = 8 << 20
	memoryBudget = 64 << 20
)

func smallBounds(o *operator.Options) {
	o.InfrahubSyncMaxArtifacts, o.InfrahubSyncMaxBytes, o.InfrahubMemoryBudget = maxArtifacts, maxBytes, memoryBudget
	// The artifact of real size holds CRDs with schemas of megabytes, which a member's API
	// server, with other packages' control planes beside it, took over 2 s to apply (the
	// other packages' operators run with 2 s): nothing here times a hung member.
	o.RequestTimeout = 10 * time.Second
}
