// Package restmapping maps kinds to resources for the clusters of a fleet. A cluster's
// Mapper loads an API group the first time it is asked for one of its kinds, and again
// when asked for something the group did not have (a CRD installed since), as
// controller-runtime's lazy mapper does. What a group maps is kept once for all the
// clusters whose API servers describe that group alike: a fleet runs a few versions of
// Kubernetes, and the core group's mapping alone is about 50 KiB, which a mapper per
// cluster kept a thousand times.
package restmapping

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Mappings holds the groups' mappings by what discovery said of them, for as long as a
// cluster's Mapper uses them. The zero value is not ready; use NewMappings.
type Mappings struct {
	mu     sync.Mutex
	groups map[[sha256.Size]byte]weak.Pointer[group]
}

// group is one API group's mapping; it never changes once built.
type group struct{ meta.RESTMapper }

// NewMappings returns an empty set of mappings.
func NewMappings() *Mappings {
	return &Mappings{groups: map[[sha256.Size]byte]weak.Pointer[group]{}}
}

// ForCluster returns a cluster's Mapper, reading discovery through httpClient; its
// signature is controller-runtime's cluster.Options.MapperProvider. Discovery is read per
// group, never in the aggregated form (which API servers serve since 1.30): that
// describes every resource of every group, where a cluster's bundles use a few groups.
func (s *Mappings) ForCluster(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	return &Mapper{mappings: s, discovery: dc, groups: map[string]*group{}, loaded: map[string]uint64{}}, nil
}

// intern returns the mapping of the group as discovery described it, built once for
// every description alike.
func (s *Mappings) intern(resources *restmapper.APIGroupResources) (*group, error) {
	described, err := json.Marshal(resources) // map keys sorted: alike descriptions encode alike
	if err != nil {
		return nil, fmt.Errorf("encode API group %q: %w", resources.Group.Name, err)
	}
	key := sha256.Sum256(described)
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[key].Value(); g != nil {
		return g, nil
	}
	g := &group{restmapper.NewDiscoveryRESTMapper([]*restmapper.APIGroupResources{resources})}
	s.groups[key] = weak.Make(g)
	runtime.AddCleanup(g, s.forget, key)
	return g, nil
}

// forget drops a mapping no cluster uses any more.
func (s *Mappings) forget(key [sha256.Size]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[key].Value() == nil {
		delete(s.groups, key)
	}
}

// len is the number of mappings held.
func (s *Mappings) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.groups)
}
