package fanout

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestResourceNamesAreDNSLabelsAndDistinct(t *testing.T) {
	long := strings.Repeat("very-long-sync-name-", 4)[:63]
	seen := map[string]string{}
	for _, sync := range []string{"web", "web-dev", long, long[:62] + "x"} {
		for _, dest := range []Target{
			{segment: "local", key: "local:"}, {segment: "local", key: "cluster:local"},
			{segment: "edge-1", key: "cluster:edge-1"}, {segment: "10.0.0.1:6443", key: "server:https://10.0.0.1:6443"},
			{segment: "10.0.0.1:6443", key: "server:https://10.0.0.1:6443/"}, {segment: strings.Repeat("c", 63), key: "cluster:" + strings.Repeat("c", 63)},
		} {
			for _, id := range []string{"18a6d5a2-0001", "18a6d5a2-0002"} {
				name := resourceName(sync, dest.segment, dest.key, id)
				if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
					t.Errorf("resourceName(%q, %q, %q) = %q: %v", sync, dest.key, id, name, errs)
				}
				key := fmt.Sprintf("%s/%s/%s", sync, dest.key, id)
				if other, dup := seen[name]; dup {
					t.Errorf("%s and %s both named %s", key, other, name)
				}
				seen[name] = key
			}
		}
	}
	if got := resourceName("web", "edge-1", "cluster:edge-1", "a"); got != resourceName("web", "edge-1", "cluster:edge-1", "a") || !strings.HasPrefix(got, "web-edge-1-") {
		t.Errorf("resourceName is not deterministic and readable: %s", got)
	}
}
