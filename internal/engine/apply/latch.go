package apply

import (
	"context"
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// Latches let the owners that one process applies take turns at an object they share
// (typically their namespace), each handing the object as it left it to the next: they
// do not fail each other's resourceVersion preconditions and read the object again, as
// owners in different processes still do. The zero value is ready to use; one Latches
// serves one cluster.
type Latches struct {
	mu      sync.Mutex
	latches map[string]*latch
}

type latch struct {
	users int           // holders and waiters
	turn  chan struct{} // holds a token while nobody holds the latch
	// last is the object as the last holder left it (nil: unknown); only the holder
	// touches it.
	last *metav1.PartialObjectMetadata
	// joiners are the holder and waiters that only join the object (guarded by
	// Latches.mu): the holder joins them all in one write.
	joiners map[string]bool
}

// acquire waits for the object's turn and returns its latch, with what the previous
// holder left of the object.
func (l *Latches) acquire(ctx context.Context, ref inventory.Ref, joiner string) (*latch, error) {
	key := ref.Key()
	l.mu.Lock()
	if l.latches == nil {
		l.latches = map[string]*latch{}
	}
	lt := l.latches[key]
	if lt == nil {
		lt = &latch{turn: make(chan struct{}, 1)}
		lt.turn <- struct{}{}
		l.latches[key] = lt
	}
	lt.users++
	if joiner != "" {
		if lt.joiners == nil {
			lt.joiners = map[string]bool{}
		}
		lt.joiners[joiner] = true
	}
	l.mu.Unlock()
	select {
	case <-lt.turn:
		return lt, nil
	case <-ctx.Done():
		l.leave(key, lt, joiner)
		return nil, ctx.Err()
	}
}

// joinersOf are the owners waiting to join the object, sorted.
func (l *Latches) joinersOf(ref inventory.Ref) []string {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lt := l.latches[ref.Key()]
	if lt == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(lt.joiners))
}

// release hands the object as the holder left it (nil: unknown) to the next holder.
func (l *Latches) release(ref inventory.Ref, lt *latch, last *metav1.PartialObjectMetadata, joiner string) {
	lt.last = last
	lt.turn <- struct{}{}
	l.leave(ref.Key(), lt, joiner)
}

func (l *Latches) leave(key string, lt *latch, joiner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(lt.joiners, joiner)
	if lt.users--; lt.users == 0 {
		delete(l.latches, key)
	}
}

// metadataOf is the metadata of an object as the API server returned it.
func metadataOf(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(u.GroupVersionKind())
	m.Namespace, m.Name = u.GetNamespace(), u.GetName()
	m.UID, m.ResourceVersion = u.GetUID(), u.GetResourceVersion()
	m.Labels, m.Annotations = u.GetLabels(), u.GetAnnotations()
	m.ManagedFields = u.GetManagedFields()
	m.DeletionTimestamp = u.GetDeletionTimestamp()
	return m
}
