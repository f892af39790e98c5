package apply

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"

	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/objectversion"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
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

// memoKey is a digest of an owner and an object it applies: a fleet's memos key every
// managed object, and a digest takes less than the strings, and no allocation of its
// own. Its 128 bits of SHA-256 cannot be made to collide by whoever names the objects.
type memoKey [16]byte

func keyOf(owner string, ref inventory.Ref) memoKey {
	parts := make([]byte, 0, 256) // on the stack for all but the longest names
	for _, s := range []string{owner, ref.GVK.Group, ref.GVK.Kind, ref.Namespace, ref.Name} {
		parts = binary.AppendUvarint(parts, uint64(len(s))) // so that parts cannot run into each other
		parts = append(parts, s...)
	}
	sum := sha256.Sum256(parts)
	return memoKey(sum[:len(memoKey{})])
}

// declaration is a digest of what an apply declared (128 bits of SHA-256, as for
// memoKey); the zero value stands for none.
type declaration [16]byte

// memoEntry is the resourceVersion an owner's last apply left an object at and a digest
// of what it declared, whether or not it declares the owners set; and when it does, what
// a later apply reads of the object: its UID, owners set and label (its apply manager is
// the owner's). The UID and resourceVersion are packed, and the owner is kept as a
// digest, for Forget: a fleet's every managed object has an entry, held in 64 bytes in
// the map itself. An owners set of the owner alone, as most are, is kept as soleOwner;
// any other is interned, as the objects of a bundle share it.
type memoEntry struct {
	version                            objectversion.Version
	declared                           declaration
	owners                             unique.Handle[string]
	owner                              ownerDigest
	declaresOwners, soleOwner, managed bool
}

// ownerDigest tells the owners of a memo's entries apart for Forget: two owners of one
// digest would forget each other's objects together, which costs their next applies a
// read each, nothing more.
type ownerDigest uint32

func digestOfOwner(owner string) ownerDigest {
	sum := sha256.Sum256([]byte(owner))
	return ownerDigest(binary.LittleEndian.Uint32(sum[:]))
}

// recall returns the object as owner's apply, by fieldManager, left it, or nil.
func (m *Memo) recall(owner, fieldManager string, ref inventory.Ref) *metav1.PartialObjectMetadata {
	if m == nil {
		return nil
	}
	key := keyOf(owner, ref)
	m.mu.Lock()
	entry, ok := m.entries[key]
	m.mu.Unlock()
	if !ok || !entry.declaresOwners {
		return nil
	}
	return entry.object(owner, fieldManager, ref)
}

// object is the object's metadata as a later apply reads it.
func (e memoEntry) object(owner, fieldManager string, ref inventory.Ref) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ref.GVK)
	obj.Namespace, obj.Name = ref.Namespace, ref.Name
	obj.UID, obj.ResourceVersion = e.version.UID(), e.version.ResourceVersion()
	var owners string
	if e.soleOwner { // kept as a flag: its handle is zero, and has no value
		owners = ownership.SetOf(owner)
	} else {
		owners = e.owners.Value()
	}
	obj.Annotations = map[string]string{vidrav1alpha1.OwnersAnnotation: owners}
	if e.managed {
		obj.Labels = map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}
	}
	obj.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: fieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: ownsOwnersFields,
	}}
	return obj
}

// unchanged says whether owner's last apply of the object declared exactly declared and
// left it at resourceVersion: applying it again would change nothing.
func (m *Memo) unchanged(owner string, ref inventory.Ref, declared declaration, resourceVersion string) bool {
	if m == nil || declared == (declaration{}) || resourceVersion == "" {
		return false
	}
	key := keyOf(owner, ref)
	m.mu.Lock()
	defer m.mu.Unlock()
	entry, ok := m.entries[key]
	return ok && entry.declared == declared && entry.version.HasResourceVersion(resourceVersion)
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
	entry := memoEntry{version: objectversion.Of("", obj.ResourceVersion), declared: declared, owner: digestOfOwner(owner)}
	if ownership.AppliesOwners(obj, fieldManager) {
		entry.declaresOwners = true
		entry.version = objectversion.Of(obj.UID, obj.ResourceVersion)
		if owners := obj.Annotations[vidrav1alpha1.OwnersAnnotation]; owners == ownership.SetOf(owner) {
			entry.soleOwner = true
		} else {
			entry.owners = unique.Make(owners)
		}
		entry.managed = ownership.IsManaged(obj)
	}
	key := keyOf(owner, ref)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[memoKey]memoEntry{}
	}
	if _, ok := m.entries[key]; ok || len(m.entries) < maxMemo {
		m.entries[key] = entry
	}
}

// advance records that the object owner's apply left at resourceVersion from is now at
// to, changed since in nothing that apply declares or reads (its status alone).
func (m *Memo) advance(owner string, ref inventory.Ref, from, to string) {
	if m == nil {
		return
	}
	key := keyOf(owner, ref)
	m.mu.Lock()
	defer m.mu.Unlock()
	if entry, ok := m.entries[key]; ok && entry.version.HasResourceVersion(from) {
		entry.version = objectversion.Of(entry.version.UID(), to)
		m.entries[key] = entry
	}
}

// forget drops what owner's apply left of the object.
func (m *Memo) forget(owner string, ref inventory.Ref) {
	if m == nil {
		return
	}
	key := keyOf(owner, ref)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
}

// Forget drops everything remembered for owner (it is gone, or its cluster is).
func (m *Memo) Forget(owner string) {
	if m == nil {
		return
	}
	digest := digestOfOwner(owner)
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, entry := range m.entries {
		if entry.owner == digest {
			delete(m.entries, key)
		}
	}
}
