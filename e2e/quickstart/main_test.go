// Package quickstart runs README.md's examples as a user types them, host names aside,
// against a hub with no Vidra installed and three members: the chart installed from a
// registry, enrollment three ways, and a bundle and a sync of every source, each served
// over https on loopback.
package quickstart

import (
	"os"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

var testenv env.Environment

func TestMain(m *testing.M) {
	testenv = env.NewWithConfig(envconf.New())
	// Not Vidra's CRDs on the hub: the chart installs them, as for a user. KubeVirt's
	// stand in, since an empty list means Vidra's.
	// The namespace controllers let each test's uninstall delete namespaces for good,
	// so that the next test installs and enrolls afresh.
	testenv.Setup(fleetenv.StartFleet(testfleet.Options{
		Members: 3, HubCRDDirectories: []string{"../../internal/test/kubevirtsim/testdata/crds"}, ControllerManager: true,
	}))
	testenv.Finish(fleetenv.StopFleet())
	os.Exit(testenv.Run(m))
}
