package inventory_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/vidra-operator/vidra/controllers/inventory"
	"github.com/vidra-operator/vidra/internal/test/capi"
	"github.com/vidra-operator/vidra/internal/test/clusterprofile"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

// listed is the namespace the operator reads inventories from; unlisted is one it does
// not; published is where it writes a ClusterProfile of each cluster.
const (
	listed    = "fleet-a"
	unlisted  = "fleet-b"
	published = "fleet-profiles"
)

// fleet is a hub serving Cluster API's Cluster, ClusterProfile and two members, none enrolled: the tests
// enroll them through Cluster API objects, read from listed alone.
var fleet *testfleet.Fleet

func TestMain(m *testing.M) {
	crds, err := capi.HubCRDDirectories()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	profiles, err := clusterprofile.CRDDirectory()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(testoperator.Main(m,
		testfleet.Options{Members: 2, HubCRDDirectories: append(crds, profiles)},
		testoperator.Options{Unenrolled: 2, Configure: func(o *operator.Options) {
			o.ClusterInventory = []string{inventory.ClusterAPIInventory, inventory.ClusterProfileInventory, inventory.ArgoCDInventory}
			o.ClusterInventoryNamespaces = []string{listed}
			o.PublishClusterProfiles = published
		}},
		func(f *testfleet.Fleet, _ *testoperator.Operator) { fleet = f }))
}
