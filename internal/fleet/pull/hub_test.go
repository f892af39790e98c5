package pull_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vidra-operator/vidra/internal/fleet/pull"
)

// TestNamespaceIsAValidNameForEveryClusterName: every cluster name (a DNS label of up to
// 63 characters) gets a namespace of its own that the API server takes.
func TestNamespaceIsAValidNameForEveryClusterName(t *testing.T) {
	long := strings.Repeat("a", 63)
	longer := strings.Repeat("a", 62) + "b"
	seen := map[string]string{}
	for _, cluster := range []string{"edge-1", "a", long, longer, strings.Repeat("x-", 31) + "y"} {
		ns := pull.Namespace(cluster)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			t.Errorf("Namespace(%q) = %q: %v", cluster, ns, errs)
		}
		if other, dup := seen[ns]; dup {
			t.Errorf("clusters %q and %q share namespace %q", cluster, other, ns)
		}
		seen[ns] = cluster
	}
	if got := pull.Namespace("edge-1"); got != "vidra-pull-edge-1" {
		t.Errorf("Namespace(edge-1) = %q", got)
	}
}
