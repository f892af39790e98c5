// Package ownership keeps the owners set of objects that several VidraResources may share:
// an owner joins or leaves with an optimistic write (conflict → re-read → retry), and the
// object is deleted only when the set becomes empty, by a delete that carries the
// resourceVersion the empty set was computed from, so an owner joining at the same moment
// is never lost. An owner that creates an object declares the set in the creating apply
// itself (stamp.go), so the object is never without its owner.
package ownership

import (
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// ID is an owner's identity in the owners set: "<hub-id>/<VidraResource name>". The hub
// ID keeps two hubs that share a member cluster from taking each other's objects.
func ID(hubID, resource string) string {
	return hubID + "/" + resource
}

// Owners reads the owners set of an object. A missing annotation is an empty set; one
// that does not parse is an error, for Vidra must not guess who owns an object.
func Owners(obj client.Object) ([]string, error) {
	raw, ok := obj.GetAnnotations()[vidrav1alpha1.OwnersAnnotation]
	if !ok || raw == "" {
		return nil, nil
	}
	var owners []string
	if err := json.Unmarshal([]byte(raw), &owners); err != nil {
		return nil, fmt.Errorf("annotation %s of %s is not a JSON array of owner IDs: %w", vidrav1alpha1.OwnersAnnotation, obj.GetName(), err)
	}
	return normalize(owners), nil
}

// normalize makes a set of owners: sorted, without duplicates or empty IDs.
func normalize(owners []string) []string {
	owners = slices.DeleteFunc(slices.Clone(owners), func(s string) bool { return s == "" })
	slices.Sort(owners)
	return slices.Compact(owners)
}

// SetOf is the owners annotation's value for a set of these owners.
func SetOf(owners ...string) string {
	return encode(owners)
}

// encode writes a set as the annotation's value.
func encode(owners []string) string {
	data, err := json.Marshal(normalize(owners))
	if err != nil {
		panic(err) // a []string always marshals
	}
	return string(data)
}

// IsManaged says whether Vidra manages the object (it carries the managed-by label).
func IsManaged(obj client.Object) bool {
	return obj.GetLabels()[vidrav1alpha1.ManagedByLabel] == vidrav1alpha1.ManagedByValue
}

// ManagedSelector selects the objects Vidra manages (IsManaged).
func ManagedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue})
}
