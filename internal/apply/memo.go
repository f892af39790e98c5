package apply

import (
	"crypto/sha256"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"

	"github.com/vidra-operator/vidra/internal/inventory"
	"github.com/vidra-operator/vidra/internal/objectversion"
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
//
// A fleet's every managed object has an entry, so an entry holds only what a later apply
// reads of the object, not its metadata.
type Memo struct {
	mu      sync.Mutex
	entries map[memoKey]memoEntry
}

type memoKey struct{ owner, object string }

// declaration is a digest of what an apply declared; the zero value stands for none.
type declaration [sha256.Size]byte

// memoEntry is the resourceVersion an owner's last apply left an object at and a digest
// of what it declared, whether or not it declares the owners set; and when it does, what
// a later apply reads of the object: its UID, owners set, label and apply manager. The
// owners set and the manager repeat across the objects of a bundle, so are interned;
// the UID and resourceVersion are packed.
type memoEntry struct {
	version              objectversion.Version
	declared             declaration
	owners, fieldManager unique.Handle[string]
	declaresOwners       bool
	managed              bool
}

// recall returns the object as owner's apply left it, or nil.
func (m *Memo) recall(owner string, ref inventory.Ref) *metav1.PartialObjectMetadata {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	entry, ok := m.entries[memoKey{owner, ref.Key()}]
	m.mu.Unlock()
	if !ok || !entry.declaresOwners {
		return nil
	}
	return entry.object(ref)
}

// object is the object's metadata as a later apply reads it.
func (e memoEntry) object(ref inventory.Ref) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.GVK)
	obj.Namespace, obj.Name = ref.Namespace, ref.Name
	obj.UID, obj.ResourceVersion = e.version.UID(), e.version.ResourceVersion()
	obj.Annotations = map[string]string{vidrav1alpha1.OwnersAnnotation: e.owners.Value()}
	if e.managed {
		obj.Labels = map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}
	}
	obj.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: e.fieldManager.Value(), Operation: metav1.ManagedFieldsOperationApply, FieldsV1: ownsOwnersFields,
	}}
	return obj
}

// unchanged says whether owner's last apply of the object declared exactly declared and
// left it at resourceVersion: applying it again would change nothing.
func (m *Memo) unchanged(owner string, ref inventory.Ref, declared declaration, resourceVersion string) bool {
	if m == nil || declared == (declaration{}) || resourceVersion == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	entry, ok := m.entries[memoKey{owner, ref.Key()}]
	return ok && entry.declared == declared && entry.version.ResourceVersion() == resourceVersion
}

// remember keeps the object as owner's apply (by fieldManager) left it; when that apply
// does not declare the owners set, the object itself is not kept, as the next apply must
// read it to know the set.
func (m *Memo) remember(owner, fieldManager string, ref inventory.Ref, obj *metav1.PartialObjectMetadata, declared declaration) {
	if m == nil {
		return
	}
	if obj == nil || !obj.DeletionTimestamp.IsZero() {
		m.forget(owner, ref)
		return
	}
	entry := memoEntry{version: objectversion.Of("", obj.ResourceVersion), declared: declared}
	if ownership.AppliesOwners(obj, fieldManager) {
		entry.declaresOwners = true
		entry.version, entry.fieldManager = objectversion.Of(obj.UID, obj.ResourceVersion), unique.Make(fieldManager)
		entry.owners = unique.Make(obj.Annotations[vidrav1alpha1.OwnersAnnotation])
		entry.managed = ownership.IsManaged(obj)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := memoKey{owner, ref.Key()}
	if m.entries == nil {
		m.entries = map[memoKey]memoEntry{}
	}
	if _, ok := m.entries[key]; ok || len(m.entries) < maxMemo {
		m.entries[key] = entry
	}
}

// forget drops what owner's apply left of the object.
func (m *Memo) forget(owner string, ref inventory.Ref) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, memoKey{owner, ref.Key()})
}

// Forget drops everything remembered for owner (it is gone, or its cluster is).
func (m *Memo) Forget(owner string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.entries {
		if key.owner == owner {
			delete(m.entries, key)
		}
	}
}
