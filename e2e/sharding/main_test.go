// Package sharding is the end-to-end suite of a fleet split across operator replicas:
// three bin/vidra processes, run with the arguments and the rights the Helm chart gives
// them, against one hub and six members.
package sharding

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
	testenv.Setup(fleetenv.StartFleet(testfleet.Options{Members: 6}))
	testenv.Finish(fleetenv.StopFleet())
	os.Exit(testenv.Run(m))
}
