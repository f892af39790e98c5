package apply

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/inventory"
	"github.com/vidra-operator/vidra/internal/ownership"
)

// maxMemo bounds the objects one Memo remembers; past it, objects are read as usual.
const maxMemo = 1 << 16

// Memo remembers objects as an owner's apply left them, when that apply declares their
// owners set (ownership.Stamp): the owner's next apply of such an object is then made at
// once, conditional on the object being exactly as it was left (same UID and
// resourceVersion, so with the owner still in its set), instead of after a read. An
// object that changed since fails the condition and is read then. The zero value is
// ready to use; one Memo serves one cluster.
type Memo struct {
	mu      sync.Mutex
	objects map[memoKey]*metav1.PartialObjectMetadata
	// applied are the resourceVersion each owner's last apply left each object at, and a
	// digest of what it declared, whether or not it declares the owners set.
	applied map[memoKey]appliedAs
}

type appliedAs struct{ resourceVersion, declared string }

type memoKey struct{ owner, object string }

// recall returns the object as owner's apply left it, or nil.
func (m *Memo) recall(owner string, ref inventory.Ref) *metav1.PartialObjectMetadata {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if obj := m.objects[memoKey{owner, ref.Key()}]; obj != nil {
		return obj.DeepCopy()
	}
	return nil
}

// unchanged says whether owner's last apply of the object declared exactly declared and
// left it at resourceVersion: applying it again would change nothing.
func (m *Memo) unchanged(owner string, ref inventory.Ref, declared, resourceVersion string) bool {
	if m == nil || declared == "" || resourceVersion == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.applied[memoKey{owner, ref.Key()}]
	return ok && a.declared == declared && a.resourceVersion == resourceVersion
}

// remember keeps the object as owner's apply (by fieldManager) left it, when that apply
// declares the owners set; otherwise the object is forgotten, as the next apply must read
// it to know the set.
func (m *Memo) remember(owner, fieldManager string, ref inventory.Ref, obj *metav1.PartialObjectMetadata, declared string) {
	if m == nil {
		return
	}
	if obj == nil || !obj.DeletionTimestamp.IsZero() {
		m.forget(owner, ref)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := memoKey{owner, ref.Key()}
	if m.applied == nil {
		m.applied = map[memoKey]appliedAs{}
	}
	if _, ok := m.applied[key]; ok || len(m.applied) < maxMemo {
		m.applied[key] = appliedAs{resourceVersion: obj.ResourceVersion, declared: declared}
	}
	if !ownership.AppliesOwners(obj, fieldManager) {
		delete(m.objects, key)
		return
	}
	kept := obj.DeepCopy()
	// Only this owner's apply entry matters to a later apply; the rest is not kept.
	kept.ManagedFields = nil
	for _, e := range obj.ManagedFields {
		if e.Manager == fieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			kept.ManagedFields = append(kept.ManagedFields, e)
		}
	}
	if m.objects == nil {
		m.objects = map[memoKey]*metav1.PartialObjectMetadata{}
	}
	if _, ok := m.objects[key]; ok || len(m.objects) < maxMemo {
		m.objects[key] = kept
	}
}

// forget drops what owner's apply left of the object.
func (m *Memo) forget(owner string, ref inventory.Ref) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, memoKey{owner, ref.Key()})
	delete(m.applied, memoKey{owner, ref.Key()})
}

// Forget drops everything remembered for owner (it is gone, or its cluster is).
func (m *Memo) Forget(owner string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.objects {
		if key.owner == owner {
			delete(m.objects, key)
		}
	}
	for key := range m.applied {
		if key.owner == owner {
			delete(m.applied, key)
		}
	}
}
