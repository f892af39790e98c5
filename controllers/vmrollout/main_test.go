package vmrollout_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/test/kubevirtsim"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// fleet is a hub and two members with KubeVirt's CRDs, enrolled. A KubeVirt simulator
// plays virt-controller on each member; member-1 also serves the restart API through its
// aggregator, member-2 does not (so VMs there restart by their VMI being deleted). Each
// test runs the operator itself, so one can stop and restart it.
var (
	fleet      *testfleet.Fleet
	simulators = map[string]*kubevirtsim.Simulator{}
)

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{Members: 2, ControllerManager: true, MemberCRDDirectories: []string{"../../internal/test/kubevirtsim/testdata/crds"}}, func(f *testfleet.Fleet) {
		fleet = f
		if err := setUp(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "set up KubeVirt simulators:", err)
			os.Exit(1)
		}
	}))
}

func setUp(ctx context.Context) error {
	log, err := testfleet.Logger()
	if err != nil {
		return err
	}
	if err := testoperator.CreateEnrollments(ctx, fleet.Hub, fleet.Members...); err != nil {
		return err
	}
	for i, member := range fleet.Members {
		sim, err := kubevirtsim.New(member.Config, kubevirtsim.Options{Log: log.WithName("kubevirt-" + member.Name)})
		if err != nil {
			return err
		}
		go sim.Run(ctx)
		simulators[member.Name] = sim
		if i == 0 {
			ip, err := kubevirtsim.RoutableIP()
			if err != nil {
				return err
			}
			if err := sim.ServeRestartAPI(ctx, ip, "kubevirt"); err != nil {
				return err
			}
		}
	}
	return nil
}
