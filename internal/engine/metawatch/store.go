package metawatch

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// store is the Watch as its reflector writes to it.
type store Watch

var _ toolscache.ReflectorStore = &store{}

// change is an object the watch had that changed or went.
type change struct {
	key      key
	was, now record
	// gone says the object went: now is none.
	gone bool
}

func (s *store) Add(obj any) error {
	return s.Update(obj)
}

func (s *store) Update(obj any) error {
	m, err := s.metadata(obj)
	if err != nil {
		return err
	}
	k, r := keyOf(m.Namespace, m.Name), recordOf(m, s.opts.Keep)
	s.mu.Lock()
	was, had := s.records[k]
	s.records[k] = r
	if had {
		s.unindex(k, was)
	}
	s.index(k, r)
	s.mu.Unlock()
	if had && !was.same(r) {
		s.tell(change{key: k, was: was, now: r})
	}
	return nil
}

func (s *store) Delete(obj any) error {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return fmt.Errorf("watch of %s: delete of %T", s.opts.Kind, obj)
	}
	k := keyOf(m.Namespace, m.Name)
	s.mu.Lock()
	was, had := s.records[k]
	delete(s.records, k)
	if had {
		s.unindex(k, was)
	}
	s.mu.Unlock()
	if had {
		s.tell(change{key: k, was: was, gone: true})
	}
	return nil
}

// Replace takes a new list (at a start, or after the watch could not resume): what
// changed or went meanwhile is reported as the watch would have.
func (s *store) Replace(list []any, _ string) error {
	records := make(map[key]record, len(list))
	for _, obj := range list {
		m, err := s.metadata(obj)
		if err != nil {
			return err
		}
		records[keyOf(m.Namespace, m.Name)] = recordOf(m, s.opts.Keep)
	}
	s.mu.Lock()
	old := s.records
	s.records = records
	s.byLabel = map[string][]key{}
	for k, r := range records {
		s.index(k, r)
	}
	s.mu.Unlock()
	if s.opts.OnListed != nil {
		for k, now := range records {
			if _, had := old[k]; !had {
				s.opts.OnListed(now.object(s.opts.Kind, k.namespace.Value(), k.name))
			}
		}
	}
	s.synced.Store(true)
	for k, was := range old {
		if now, has := records[k]; !has || !was.same(now) {
			s.tell(change{key: k, was: was, now: now, gone: !has})
		}
	}
	return nil
}

// index adds the record's key under its IndexLabel's value; s.mu is held.
func (s *store) index(k key, r record) {
	value, ok := r.label(s.opts.IndexLabel)
	if !ok {
		return
	}
	s.byLabel[value] = append(s.byLabel[value], k)
}

// unindex removes what index added for the record; s.mu is held.
func (s *store) unindex(k key, r record) {
	value, ok := r.label(s.opts.IndexLabel)
	if !ok {
		return
	}
	keys := slices.DeleteFunc(s.byLabel[value], func(o key) bool { return o == k })
	if len(keys) == 0 {
		delete(s.byLabel, value)
		return
	}
	s.byLabel[value] = keys
}

// Resync has nothing to do: the watch never resyncs.
func (s *store) Resync() error {
	return nil
}

// metadata is obj, transformed.
func (s *store) metadata(obj any) (*metav1.PartialObjectMetadata, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("watch of %s: got %T", s.opts.Kind, obj)
	}
	if s.opts.Transform != nil {
		s.opts.Transform(m)
	}
	return m, nil
}

func (s *store) tell(c change) {
	if s.opts.OnChange == nil {
		return
	}
	namespace := c.key.namespace.Value()
	var now *metav1.PartialObjectMetadata
	if !c.gone {
		now = c.now.object(s.opts.Kind, namespace, c.key.name)
	}
	s.opts.OnChange(c.was.object(s.opts.Kind, namespace, c.key.name), now)
}
