package sourcesync_test

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

// fleet is a hub and two enrolled members, with the operator wired as the binary wires it
// running in this process. Every cluster runs the garbage collector, so deleting a sync
// really removes its VidraResources.
var fleet *testfleet.Fleet

// registry holds the operator's metrics.
var registry prometheus.Gatherer

func TestMain(m *testing.M) {
	os.Exit(testoperator.Main(m, testfleet.Options{Members: 2, ControllerManager: true}, testoperator.Options{Configure: smallBounds},
		func(f *testfleet.Fleet, op *testoperator.Operator) { fleet, registry = f, op.Registry }))
}

// The bounds of fetching the tests run with: small enough for a test to go over them
// cheaply, large enough for every other test.
const (
	maxFiles    = 200
	maxRepo     = 4 << 20
	maxArtifact = 1 << 20
)

func smallBounds(o *operator.Options) {
	o.SourceMaxFiles, o.GitMaxRepoBytes, o.OCIMaxArtifactBytes = maxFiles, maxRepo, maxArtifact
	// The repository of real size holds CRDs with schemas of megabytes, which a member's
	// API server, with other packages' control planes beside it, took over 2 s to apply
	// again and again (the other packages' operators run with 2 s): nothing here times a
	// hung member.
	o.RequestTimeout = 10 * time.Second
}
