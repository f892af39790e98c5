package apply_test

import (
	"os"
	"testing"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// member is a real destination cluster: server-side apply, conflicts and preconditions
// are the API server's decisions. Vidra's CRDs are not on it, as on a real member.
var member *testfleet.Cluster

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{Members: 1}, func(f *testfleet.Fleet) { member = f.Members[0] }))
}
