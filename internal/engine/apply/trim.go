package apply

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// The managed fields of an object list, field by field, what each manager set: mostly
// they are larger than the rest of its metadata. Of a cached or remembered object Vidra
// reads only who wrote it, how and when (drift) and whether its own applies own the
// owners annotation (ownership.Stamp). The rest is dropped, so the memory an object
// costs does not grow with the fields it has.
var (
	ownsOwnersFields    = metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:` + vidrav1alpha1.OwnersAnnotation + `":{}}}}`)
	ownsNotOwnersFields = metav1.NewFieldsV1(`{}`)
)

// TrimManagedFields keeps of obj's managed fields each entry's manager, operation, time,
// subresource and API version, and of Vidra's applies whether they own the owners
// annotation. A trimmed object must never be sent back in an update: the managed fields
// it carries would replace the API server's.
func TrimManagedFields(obj metav1.Object) {
	entries := obj.GetManagedFields()
	if len(entries) == 0 {
		return
	}
	trimmed := make([]metav1.ManagedFieldsEntry, len(entries))
	for i, e := range entries {
		e.FieldsV1 = nil
		if strings.HasPrefix(e.Manager, FieldManagerPrefix) && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			e.FieldsV1 = ownsNotOwnersFields
			if ownership.AppliesOwners(obj, e.Manager) {
				e.FieldsV1 = ownsOwnersFields
			}
		}
		trimmed[i] = e
	}
	obj.SetManagedFields(trimmed)
}

// TrimCached is a cache transform: the objects a metadata-only watch caches (as drift
// watches are) keep their managed fields trimmed, other objects none. Nothing reads the
// managed fields of a cached typed object, and an update of one that carries none keeps
// the API server's (an update that carries some would replace them).
func TrimCached(obj any) (any, error) {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		TrimManagedFields(o)
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}
