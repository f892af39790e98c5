package metawatch

import (
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vidra-operator/vidra/internal/objectversion"
)

// record is what a watch keeps of one object, in one allocation and a small slice: its
// UID and resourceVersion packed, and its kept labels, annotations and managed-fields
// entries interned, as the objects of a bundle share them. A decoded object's strings
// are allocations of their own, and a record pinning them would hold them apart among
// the garbage of the decoding, each in a span it keeps in use.
type record struct {
	version    objectversion.Version
	generation int64
	// deleted is the deletion timestamp in Unix seconds (the precision the API keeps), 0
	// while the object is not being deleted.
	deleted int64
	// kept is the kept labels and annotations (encodeKept).
	kept     unique.Handle[string]
	managers []unique.Handle[manager]
}

// manager is a managed-fields entry; fields is kept as the watch's transform left it
// (Vidra's trim makes it one of two shared values).
type manager struct {
	name, operation, apiVersion, subresource string
	// time is in Unix seconds, 0 for none.
	time   int64
	fields *metav1.FieldsV1
}

// recordOf keeps of obj what keep names.
func recordOf(obj *metav1.PartialObjectMetadata, keep Keep) *record {
	r := &record{
		version: objectversion.Of(obj.UID, obj.ResourceVersion), generation: obj.Generation,
		kept: unique.Make(encodeKept(obj, keep)),
	}
	if obj.DeletionTimestamp != nil {
		r.deleted = obj.DeletionTimestamp.Unix()
	}
	if keep.ManagedFields && len(obj.ManagedFields) > 0 {
		r.managers = make([]unique.Handle[manager], len(obj.ManagedFields))
		for i, e := range obj.ManagedFields {
			m := manager{
				name: e.Manager, operation: string(e.Operation), apiVersion: e.APIVersion, subresource: e.Subresource, fields: e.FieldsV1,
			}
			if e.Time != nil {
				m.time = e.Time.Unix()
			}
			r.managers[i] = unique.Make(m)
		}
	}
	return r
}

// object rebuilds the object's metadata from its record.
func (r *record) object(gvk schema.GroupVersionKind, namespace, name string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	obj.Namespace, obj.Name = namespace, name
	obj.UID, obj.ResourceVersion = r.version.UID(), r.version.ResourceVersion()
	obj.Generation = r.generation
	if r.deleted != 0 {
		t := metav1.NewTime(time.Unix(r.deleted, 0))
		obj.DeletionTimestamp = &t
	}
	obj.Labels, obj.Annotations = decodeKept(r.kept.Value())
	if len(r.managers) > 0 {
		obj.ManagedFields = make([]metav1.ManagedFieldsEntry, len(r.managers))
		for i, h := range r.managers {
			m := h.Value()
			e := metav1.ManagedFieldsEntry{
				Manager: m.name, Operation: metav1.ManagedFieldsOperationType(m.operation),
				APIVersion: m.apiVersion, Subresource: m.subresource, FieldsV1: m.fields,
			}
			if m.fields != nil {
				e.FieldsType = "FieldsV1"
			}
			if m.time != 0 {
				t := metav1.NewTime(time.Unix(m.time, 0))
				e.Time = &t
			}
			obj.ManagedFields[i] = e
		}
	}
	return obj
}

// label is the value of the kept label key; none for an empty key.
func (r *record) label(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	return keptLabel(r.kept.Value(), key)
}

// same says whether two records are of one object at one resourceVersion.
func (r *record) same(o *record) bool {
	return r.version.Equal(o.version)
}
