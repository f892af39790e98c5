package metawatch

import (
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// record is what a watch keeps of one object. Strings that repeat across objects (label
// and annotation values, managers, API versions) are interned: a thousand objects of one
// bundle share one copy of their owners set.
type record struct {
	uid             types.UID
	resourceVersion string
	generation      int64
	// deleted is the deletion timestamp in Unix seconds (the precision the API keeps), 0
	// while the object is not being deleted.
	deleted     int64
	labels      []pair
	annotations []pair
	managers    []manager
}

type pair struct {
	key, value unique.Handle[string]
}

// manager is a managed-fields entry; fields is kept as the watch's transform left it
// (Vidra's trim makes it one of two shared values).
type manager struct {
	name, operation, apiVersion, subresource unique.Handle[string]
	// time is in Unix seconds, 0 for none.
	time   int64
	fields *metav1.FieldsV1
}

// recordOf keeps of obj what keep names.
func recordOf(obj *metav1.PartialObjectMetadata, keep Keep) *record {
	r := &record{
		uid: obj.UID, resourceVersion: obj.ResourceVersion, generation: obj.Generation,
		labels: kept(obj.Labels, keep.Labels), annotations: kept(obj.Annotations, keep.Annotations),
	}
	if obj.DeletionTimestamp != nil {
		r.deleted = obj.DeletionTimestamp.Unix()
	}
	if keep.ManagedFields && len(obj.ManagedFields) > 0 {
		r.managers = make([]manager, len(obj.ManagedFields))
		for i, e := range obj.ManagedFields {
			m := manager{
				name: unique.Make(e.Manager), operation: unique.Make(string(e.Operation)),
				apiVersion: unique.Make(e.APIVersion), subresource: unique.Make(e.Subresource), fields: e.FieldsV1,
			}
			if e.Time != nil {
				m.time = e.Time.Unix()
			}
			r.managers[i] = m
		}
	}
	return r
}

func kept(from map[string]string, keys []string) []pair {
	var pairs []pair
	for _, k := range keys {
		if v, ok := from[k]; ok {
			pairs = append(pairs, pair{unique.Make(k), unique.Make(v)})
		}
	}
	return pairs
}

// object rebuilds the object's metadata from its record.
func (r *record) object(gvk schema.GroupVersionKind, namespace, name string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	obj.Namespace, obj.Name = namespace, name
	obj.UID, obj.ResourceVersion, obj.Generation = r.uid, r.resourceVersion, r.generation
	if r.deleted != 0 {
		t := metav1.NewTime(time.Unix(r.deleted, 0))
		obj.DeletionTimestamp = &t
	}
	obj.Labels, obj.Annotations = asMap(r.labels), asMap(r.annotations)
	if len(r.managers) > 0 {
		obj.ManagedFields = make([]metav1.ManagedFieldsEntry, len(r.managers))
		for i, m := range r.managers {
			e := metav1.ManagedFieldsEntry{
				Manager: m.name.Value(), Operation: metav1.ManagedFieldsOperationType(m.operation.Value()),
				APIVersion: m.apiVersion.Value(), Subresource: m.subresource.Value(), FieldsV1: m.fields,
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

func asMap(pairs []pair) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p.key.Value()] = p.value.Value()
	}
	return m
}

// label is the value of the kept label key; none for an empty key.
func (r *record) label(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	for _, p := range r.labels {
		if p.key.Value() == key {
			return p.value.Value(), true
		}
	}
	return "", false
}

// same says whether two records are of one object at one resourceVersion.
func (r *record) same(o *record) bool {
	return r.uid == o.uid && r.resourceVersion == o.resourceVersion
}
