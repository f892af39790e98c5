package apply_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/testfleet"
)

// member is a real destination cluster: server-side apply, conflicts and preconditions
// are the API server's decisions. Vidra's CRDs are not on it, as on a real member.
var member *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	fleet, err := testfleet.Start(context.Background(), testfleet.Options{Members: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start fleet:", err)
		return 1
	}
	defer func() { _ = fleet.Stop() }()
	member = fleet.Members[0]
	return m.Run()
}
