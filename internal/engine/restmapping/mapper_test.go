package restmapping_test

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/internal/engine/restmapping"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

var fleet *testfleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{Members: 2}, func(f *testfleet.Fleet) { fleet = f }))
}

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

// mapperOf is a mapper of the cluster, from mappings, and the log of what it fetched.
func mapperOf(t *testing.T, mappings *restmapping.Mappings, c *testfleet.Cluster) (*restmapping.Mapper, *discoveryLog) {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	log := &discoveryLog{next: httpClient.Transport}
	httpClient.Transport = log
	m, err := mappings.ForCluster(c.Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	return m.(*restmapping.Mapper), log
}

func mapping(t *testing.T, m meta.RESTMapper, gk schema.GroupKind, versions ...string) *meta.RESTMapping {
	t.Helper()
	got, err := m.RESTMapping(gk, versions...)
	if err != nil {
		t.Fatalf("map %v: %v", gk, err)
	}
	return got
}

// TestAMapperLoadsOnlyTheGroupsItIsAskedFor: mapping ConfigMaps, ten at once, loads the
// core group alone, once, never the aggregated document of every group; a group asked
// for later is loaded then.
func TestAMapperLoadsOnlyTheGroupsItIsAskedFor(t *testing.T) {
	m, log := mapperOf(t, restmapping.NewMappings(), fleet.Members[0])
	var wg sync.WaitGroup
	for range 10 { // as a bundle's objects are applied: side by side, one load for all
		wg.Go(func() {
			if got, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err != nil || got.Resource.Resource != "configmaps" || got.Scope.Name() != meta.RESTScopeNameNamespace {
				t.Errorf("ConfigMap mapped to %+v, %v", got, err)
			}
		})
	}
	wg.Wait()
	if got := mapping(t, m, schema.GroupKind{Kind: "Namespace"}); got.Resource.Resource != "namespaces" || got.Scope.Name() != meta.RESTScopeNameRoot {
		t.Errorf("Namespace mapped to %+v", got)
	}
	var paths []string
	for _, fetched := range log.paths() {
		if strings.Contains(fetched, "apidiscovery") {
			t.Errorf("fetched %q, aggregated", fetched)
		}
		paths = append(paths, strings.Fields(fetched)[0])
	}
	if !slices.Equal(paths, []string{"/api", "/api/v1"}) {
		t.Errorf("mapping a ConfigMap and a Namespace fetched %v: only /api and /api/v1 were needed", paths)
	}
	if got := mapping(t, m, schema.GroupKind{Group: "apps", Kind: "Deployment"}); got.Resource.Resource != "deployments" {
		t.Errorf("Deployment mapped to %+v", got)
	}
	if !slices.ContainsFunc(log.paths(), func(f string) bool { return strings.HasPrefix(f, "/apis/apps/v1 ") }) {
		t.Errorf("mapping a Deployment did not load apps/v1: fetched %v", log.paths())
	}
	if gvk, err := m.KindFor(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}); err != nil || gvk.Kind != "Deployment" {
		t.Errorf("deployments are of kind %v, %v", gvk, err)
	}
}

// TestClustersAlikeShareAGroupsMapping: two API servers of one version describe the core
// group alike, so their mappers hold one mapping of it; a mapping no mapper holds is let go.
func TestClustersAlikeShareAGroupsMapping(t *testing.T) {
	mappings := restmapping.NewMappings()
	func() { // the mappers are gone when it returns
		first, _ := mapperOf(t, mappings, fleet.Members[0])
		second, _ := mapperOf(t, mappings, fleet.Members[1])
		mapping(t, first, schema.GroupKind{Kind: "ConfigMap"}, "v1")
		mapping(t, second, schema.GroupKind{Kind: "Secret"}, "v1")
		if first.Loaded("") == nil || first.Loaded("") != second.Loaded("") {
			t.Errorf("two servers alike hold two mappings of the core group")
		}
		if n := mappings.Len(); n != 1 {
			t.Errorf("%d mappings held, want the core group's alone", n)
		}
	}()
	testfleet.Eventually(t, 10*time.Second, "the unused mapping let go", func() (bool, error) {
		runtime.GC()
		return mappings.Len() == 0, nil
	})
}

// TestKindsInstalledAfterAMapperStartedAreFound: a group that appears after the mapper's
// first lookup, and a kind added to a group it had loaded, are found; servers whose
// groups differ do not share their mappings; a kind no server has is no match.
func TestKindsInstalledAfterAMapperStartedAreFound(t *testing.T) {
	mappings := restmapping.NewMappings()
	first, _ := mapperOf(t, mappings, fleet.Members[0])
	second, _ := mapperOf(t, mappings, fleet.Members[1])
	// A group of its own per run: a CRD deleted by an earlier run may still be served.
	widget := schema.GroupKind{Group: fmt.Sprintf("r%d.example.vidra.dev", time.Now().UnixNano()), Kind: "Widget"}
	for _, m := range []*restmapping.Mapper{first, second} {
		mapping(t, m, schema.GroupKind{Kind: "ConfigMap"})
		if _, err := m.RESTMapping(widget); !meta.IsNoMatchError(err) {
			t.Fatalf("a Widget before its CRD: %v, want no match", err)
		}
	}
	fleet.Members[0].ServeKind(t, widget.Group, "Widget", apiextensionsv1.NamespaceScoped)
	fleet.Members[1].ServeKind(t, widget.Group, "Widget", apiextensionsv1.ClusterScoped)
	if got := mapping(t, first, widget); got.Resource.Resource != "widgets" || got.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("Widget mapped to %+v on %s", got, fleet.Members[0].Name)
	}
	if got := mapping(t, second, widget); got.Scope.Name() != meta.RESTScopeNameRoot {
		t.Errorf("Widget mapped to %+v on %s, where it is cluster-scoped", got, fleet.Members[1].Name)
	}
	if first.Loaded(widget.Group) == second.Loaded(widget.Group) {
		t.Errorf("servers that describe %s differently share its mapping", widget.Group)
	}
	fleet.Members[0].ServeKind(t, widget.Group, "Gadget", apiextensionsv1.NamespaceScoped)
	if got := mapping(t, first, schema.GroupKind{Group: widget.Group, Kind: "Gadget"}, "v1"); got.Resource.Resource != "gadgets" {
		t.Errorf("Gadget mapped to %+v", got)
	}
	if _, err := first.RESTMapping(schema.GroupKind{Group: widget.Group, Kind: "Nothing"}); !meta.IsNoMatchError(err) {
		t.Errorf("a kind no server has: %v, want no match", err)
	}
}
