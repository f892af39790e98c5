package metawatch

import (
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vidra-operator/vidra/internal/engine/objectversion"
)

// record is what a watch keeps of one object, held in the watch's map itself: its UID
// and resourceVersion packed, and the rest of what it keeps as one interned shape, as
// the objects of a bundle share their kept labels, annotations and managed-fields
// entries. A record of its own, or a string or slice it pinned, would be an allocation
// of its own among the garbage of the decoding, each in a span it keeps in use.
type record struct {
	version    objectversion.Version
	generation int64
	// deleted is the deletion timestamp in Unix seconds (the precision the API keeps), 0
	// while the object is not being deleted.
	deleted int64
	shape   unique.Handle[shape]
}

// shape is the kept labels and annotations (encodeKept) and the managed-fields entries
// (encodeManagers) of an object.
type shape struct{ kept, managers string }

// recordOf keeps of obj what keep names.
func recordOf(obj *metav1.PartialObjectMetadata, keep Keep) record {
	r := record{version: objectversion.Of(obj.UID, obj.ResourceVersion), generation: obj.Generation}
	if obj.DeletionTimestamp != nil {
		r.deleted = obj.DeletionTimestamp.Unix()
	}
	s := shape{kept: encodeKept(obj, keep)}
	if keep.ManagedFields {
		s.managers = encodeManagers(obj.ManagedFields)
	}
	r.shape = unique.Make(s)
	return r
}

// object rebuilds the object's metadata from its record.
func (r record) object(gvk schema.GroupVersionKind, namespace, name string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	obj.Namespace, obj.Name = namespace, name
	obj.UID, obj.ResourceVersion = r.version.UID(), r.version.ResourceVersion()
	obj.Generation = r.generation
	if r.deleted != 0 {
		t := metav1.NewTime(time.Unix(r.deleted, 0))
		obj.DeletionTimestamp = &t
	}
	s := r.shape.Value()
	obj.Labels, obj.Annotations = decodeKept(s.kept)
	obj.ManagedFields = decodeManagers(s.managers)
	return obj
}

// label is the value of the kept label key; none for an empty key.
func (r record) label(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	return keptLabel(r.shape.Value().kept, key)
}

// same says whether two records are of one object at one resourceVersion.
func (r record) same(o record) bool {
	return r.version.Equal(o.version)
}
