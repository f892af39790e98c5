package restmapping

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
)

// Mapper is one cluster's RESTMapper. A kind or resource is looked up in the group it
// names (the core group when it names none); unlike a mapper of every group, a partial
// resource is not matched across groups.
type Mapper struct {
	mappings  *Mappings
	discovery discovery.DiscoveryInterface

	// loading makes one load at a time. Lookups of one new group come together (a
	// bundle's objects are applied side by side), and all but the first are answered by
	// its load: a lookup that missed uses any load of the group that started after it.
	loading sync.Mutex
	mu      sync.RWMutex
	groups  map[string]*group
	// loads counts the loads started; loaded holds, per group, the count when its last
	// load started.
	loads  uint64
	loaded map[string]uint64
}

var _ meta.RESTMapper = &Mapper{}

// KindFor implements meta.RESTMapper.
func (m *Mapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return lookup(m, resource.Group, func(g meta.RESTMapper) (schema.GroupVersionKind, error) { return g.KindFor(resource) })
}

// KindsFor implements meta.RESTMapper.
func (m *Mapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return lookup(m, resource.Group, func(g meta.RESTMapper) ([]schema.GroupVersionKind, error) { return g.KindsFor(resource) })
}

// ResourceFor implements meta.RESTMapper.
func (m *Mapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return lookup(m, input.Group, func(g meta.RESTMapper) (schema.GroupVersionResource, error) { return g.ResourceFor(input) })
}

// ResourcesFor implements meta.RESTMapper.
func (m *Mapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return lookup(m, input.Group, func(g meta.RESTMapper) ([]schema.GroupVersionResource, error) { return g.ResourcesFor(input) })
}

// RESTMapping implements meta.RESTMapper.
func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return lookup(m, gk.Group, func(g meta.RESTMapper) (*meta.RESTMapping, error) { return g.RESTMapping(gk, versions...) })
}

// RESTMappings implements meta.RESTMapper.
func (m *Mapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return lookup(m, gk.Group, func(g meta.RESTMapper) ([]*meta.RESTMapping, error) { return g.RESTMappings(gk, versions...) })
}

// ResourceSingularizer implements meta.RESTMapper, from the groups loaded so far.
func (m *Mapper) ResourceSingularizer(resource string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, g := range m.groups {
		if singular, err := g.ResourceSingularizer(resource); err == nil {
			return singular, nil
		}
	}
	return resource, fmt.Errorf("no resource %q in the API groups loaded", resource)
}

// lookup asks the group's mapping, loading the group when this mapper has not yet, or
// again when the mapping has no match: the group may have gained the kind since.
func lookup[T any](m *Mapper, name string, ask func(meta.RESTMapper) (T, error)) (T, error) {
	m.mu.RLock()
	g, missedAt := m.groups[name], m.loads
	if _, ever := m.loaded[name]; !ever {
		missedAt = 0 // never loaded: the first load answers every lookup waiting for one
	}
	m.mu.RUnlock()
	if g != nil {
		if out, err := ask(g); !meta.IsNoMatchError(err) {
			return out, err
		}
	}
	loaded, err := m.load(name, missedAt)
	if err != nil {
		var none T
		return none, err
	}
	return ask(loaded)
}

// load reads the group's discovery and keeps its mapping, unless a load of the group
// started after missedAt (the loads started when the lookup missed): that one's is as
// new. A group the server does not serve maps nothing.
func (m *Mapper) load(name string, missedAt uint64) (meta.RESTMapper, error) {
	m.loading.Lock()
	defer m.loading.Unlock()
	m.mu.Lock()
	if m.loaded[name] > missedAt {
		defer m.mu.Unlock()
		return m.mapping(name), nil
	}
	m.loads++
	started := m.loads
	m.mu.Unlock()
	resources, err := m.discover(name)
	if err != nil {
		return nil, err
	}
	var g *group
	if resources != nil {
		if g, err = m.mappings.intern(resources); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loaded[name] = started
	if g == nil {
		delete(m.groups, name)
	} else {
		m.groups[name] = g
	}
	return m.mapping(name), nil
}

// mapping is what the mapper maps of the group: nothing for a group not served; m.mu is
// held.
func (m *Mapper) mapping(name string) meta.RESTMapper {
	if g := m.groups[name]; g != nil {
		return g
	}
	return meta.MultiRESTMapper(nil)
}

// discover reads what the server serves of the group: its versions, then each version's
// resources; nil when it serves none. A version listed but gone by the time it is read
// (a CRD's version removed) is left out.
func (m *Mapper) discover(name string) (*restmapper.APIGroupResources, error) {
	apiGroup, err := m.serverGroup(name)
	if err != nil || apiGroup == nil {
		return nil, err
	}
	// Where clients reach the server differs between servers and maps nothing.
	apiGroup.ServerAddressByClientCIDRs = nil
	resources := &restmapper.APIGroupResources{Group: *apiGroup, VersionedResources: map[string][]metav1.APIResource{}}
	var failed []error
	for _, v := range apiGroup.Versions {
		list, err := m.discovery.ServerResourcesForGroupVersion(v.GroupVersion)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			failed = append(failed, fmt.Errorf("discover %s: %w", v.GroupVersion, err))
		default:
			resources.VersionedResources[v.Version] = list.APIResources
		}
	}
	if len(failed) > 0 {
		return nil, errors.Join(failed...)
	}
	if len(resources.VersionedResources) == 0 {
		return nil, nil
	}
	return resources, nil
}

// serverGroup is the group as the server lists it (nil when it does not): the core group
// from /api, the others from /apis, one request either way where discovery's
// ServerGroups makes two.
func (m *Mapper) serverGroup(name string) (*metav1.APIGroup, error) {
	ctx := context.TODO() // a RESTMapper is given no context
	if name == "" {
		core := &metav1.APIVersions{}
		if err := m.discovery.RESTClient().Get().AbsPath("/api").Do(ctx).Into(core); err != nil {
			return nil, fmt.Errorf("list the core group's versions: %w", err)
		}
		if len(core.Versions) == 0 {
			return nil, nil
		}
		group := &metav1.APIGroup{}
		for _, v := range core.Versions {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v})
		}
		group.PreferredVersion = group.Versions[0]
		return group, nil
	}
	groups := &metav1.APIGroupList{}
	if err := m.discovery.RESTClient().Get().AbsPath("/apis").Do(ctx).Into(groups); err != nil {
		return nil, fmt.Errorf("list API groups: %w", err)
	}
	i := slices.IndexFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == name })
	if i < 0 {
		return nil, nil
	}
	return &groups.Groups[i], nil
}
