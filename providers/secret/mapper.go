package secret

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// newMemberMapper is a member cluster's RESTMapper: controller-runtime's lazy mapper, over
// discovery asked for in its per-group form. Asked for aggregated discovery (which API
// servers serve since 1.30), the first lookup loads every resource of every group of the
// cluster, about 175 KiB of mappings kept for as long as the cluster is engaged, where a
// cluster's bundles use a few groups: at 1,000 clusters, 43% of the operator's heap. Per
// group, a lookup loads the group it needs, once (a request per group version).
func newMemberMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	perGroup := *httpClient
	perGroup.Transport = perGroupDiscovery{next: httpClient.Transport}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, &perGroup)
	if err != nil {
		return nil, fmt.Errorf("build REST mapper: %w", err)
	}
	return mapper, nil
}

// perGroupDiscovery asks for discovery documents in their per-group form: a request that
// accepts the aggregated form (apidiscovery.k8s.io) accepts JSON only.
type perGroupDiscovery struct{ next http.RoundTripper }

func (t perGroupDiscovery) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.Header.Get("Accept"), "apidiscovery.k8s.io") {
		req = req.Clone(req.Context())
		req.Header.Set("Accept", "application/json")
	}
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(req)
}
