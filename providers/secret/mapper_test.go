package secret_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/providers/secret"
)

// discoveryLog records each document fetched through it, with the form it came in.
type discoveryLog struct {
	next    http.RoundTripper
	mu      sync.Mutex
	fetched []string
}

func (l *discoveryLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil {
		l.mu.Lock()
		l.fetched = append(l.fetched, req.URL.Path+" "+resp.Header.Get("Content-Type"))
		l.mu.Unlock()
	}
	return resp, err
}

func (l *discoveryLog) paths() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.fetched)
}

// TestAMemberMapperLoadsOnlyTheGroupsItIsAskedFor: mapping a ConfigMap loads the core
// group alone, never the aggregated document of every group; a group asked for later is
// loaded then.
func TestAMemberMapperLoadsOnlyTheGroupsItIsAskedFor(t *testing.T) {
	member := fleet.Members[0]
	httpClient, err := rest.HTTPClientFor(member.Config)
	if err != nil {
		t.Fatal(err)
	}
	log := &discoveryLog{next: httpClient.Transport}
	httpClient.Transport = log
	mapper, err := secret.NewMemberMapper(member.Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := mapper.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err != nil || m.Resource.Resource != "configmaps" {
		t.Fatalf("ConfigMap mapped to %v, %v", m, err)
	}
	for _, fetched := range log.paths() {
		if strings.Contains(fetched, "apidiscovery") || strings.HasPrefix(fetched, "/apis/") {
			t.Errorf("mapping a ConfigMap fetched %q: only /api, /apis and /api/v1, per group, were needed", fetched)
		}
	}
	m, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	if err != nil || m.Resource.Resource != "deployments" {
		t.Fatalf("Deployment mapped to %v, %v", m, err)
	}
	if !slices.ContainsFunc(log.paths(), func(f string) bool { return strings.HasPrefix(f, "/apis/apps/v1 ") }) {
		t.Errorf("mapping a Deployment did not load apps/v1: fetched %v", log.paths())
	}
}
