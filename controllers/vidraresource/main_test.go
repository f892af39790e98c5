package vidraresource_test

import (
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/testfleet"
	"github.com/vidra-operator/vidra/internal/testoperator"
)

const (
	namespace = testoperator.Namespace
	hubID     = testoperator.HubID
)

// fleet is a hub and two enrolled members, with Vidra's controller and cluster provider
// running in this process against them. The members run the namespace and garbage
// collector controllers, so deleted namespaces really go.
var fleet *testfleet.Fleet

// registry holds the controller's metrics.
var registry prometheus.Gatherer

// watches are the controller's drift watches.
var watches *vidraresource.DriftWatches

// store is the operator's content store.
var store *content.Store

func TestMain(m *testing.M) {
	os.Exit(testoperator.Main(m, testfleet.Options{Members: 2, ControllerManager: true}, testoperator.Options{},
		func(f *testfleet.Fleet, op *testoperator.Operator) {
			fleet, registry, watches, store = f, op.Registry, op.Watches, op.Content
		}))
}
