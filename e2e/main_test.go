// Package e2e holds end-to-end suites: the real bin/vidra binary driven the way a user
// would, against a fleet of real control planes.
package e2e

import (
	"fmt"
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
	vidraCRDs, err := testfleet.CRDDirectory()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// KubeVirt's CRDs on every cluster: the hub too, as a standalone cluster running VMs.
	kubevirtCRDs := "../internal/test/kubevirtsim/testdata/crds"
	testenv.Setup(fleetenv.StartFleet(testfleet.Options{
		Members: 2, HubCRDDirectories: []string{vidraCRDs, kubevirtCRDs}, MemberCRDDirectories: []string{kubevirtCRDs},
	}))
	testenv.Finish(fleetenv.StopFleet())
	os.Exit(testenv.Run(m))
}
