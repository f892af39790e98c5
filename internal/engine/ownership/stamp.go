package ownership

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// An owner's server-side apply may carry the owners set itself, so that an object is
// created already owned, in one request and with no moment where it exists unowned. The
// owner's apply manager then owns the annotation, and an apply that omits a field its
// manager owns removes it: so the owner keeps declaring the set, as it reads it, for as
// long as its manager owns it (until an owners-set write of Writer takes it over). Every
// apply that declares the set carries the resourceVersion it was read at, so a set that
// changed meanwhile makes the apply fail with a Conflict instead of being overwritten.

// absentVersion is a resourceVersion no object has (etcd revisions count up from 1 and
// are int64). An apply that carries it creates the object, or fails with a Conflict
// without touching an object that exists: a create that never takes over.
const absentVersion = "9223372036854775807"

// StampNew prepares obj for an apply by owner that creates it: its owners set is owner
// (with others, owners of the same process creating it together), and the apply fails
// with a Conflict if the object exists after all (it must be read then, and joined as any
// existing object).
func StampNew(obj client.Object, owner string, others ...string) {
	setOwners(obj, encode(append([]string{owner}, others...)))
	obj.SetResourceVersion(absentVersion)
}

// Stamp prepares obj for an apply, by fieldManager, to the existing object live (as
// read, with owner in its set). The apply carries live's UID, so it never creates the
// object again once deleted. When fieldManager's apply owns the owners annotation it
// declares the set exactly as read, with live's resourceVersion as a precondition; when
// it does not, the set is left out and stays whoever's it is.
func Stamp(obj client.Object, live *metav1.PartialObjectMetadata, fieldManager string) {
	obj.SetUID(live.UID)
	if !AppliesOwners(live, fieldManager) {
		removeOwners(obj)
		return
	}
	setOwners(obj, live.Annotations[vidrav1alpha1.OwnersAnnotation])
	obj.SetResourceVersion(live.ResourceVersion)
}

// IsOwnersField says whether a field path of an apply conflict is the owners annotation:
// the set declared was read before someone else changed it.
func IsOwnersField(path string) bool {
	return path == ".metadata.annotations."+vidrav1alpha1.OwnersAnnotation
}

// AppliesOwners says whether the apply of fieldManager owns the owners annotation of obj.
// Managed fields that cannot be read count as owned: declaring the set as read, with its
// resourceVersion, is always safe, leaving it out of an apply that owns it is not.
func AppliesOwners(obj metav1.Object, fieldManager string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != fieldManager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			continue
		}
		if e.FieldsV1 == nil {
			return false
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			return true
		}
		_, owned := fields.Metadata.Annotations["f:"+vidrav1alpha1.OwnersAnnotation]
		return owned
	}
	return false
}

func setOwners(obj client.Object, value string) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[vidrav1alpha1.OwnersAnnotation] = value
	obj.SetAnnotations(annotations)
}

func removeOwners(obj client.Object) {
	if annotations := obj.GetAnnotations(); annotations != nil {
		delete(annotations, vidrav1alpha1.OwnersAnnotation)
		obj.SetAnnotations(annotations)
	}
}

// StampPreview prepares obj for a dry-run that shows how owner's apply would leave the
// object: labeled managed by Vidra, its owners set that of live (nil: absent) with owner.
func StampPreview(obj client.Object, live client.Object, owner string) error {
	owners := []string{owner}
	if live != nil {
		current, err := Owners(live)
		if err != nil {
			return err
		}
		owners = append(owners, current...)
		obj.SetUID(live.GetUID())
	}
	setOwners(obj, encode(owners))
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[vidrav1alpha1.ManagedByLabel] = vidrav1alpha1.ManagedByValue
	obj.SetLabels(labels)
	return nil
}
