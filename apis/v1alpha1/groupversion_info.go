// Package v1alpha1 holds the Vidra API: InfrahubSync, VidraResource and VidraCluster in
// the group infrahub.operators.com. The group, kinds and JSON names of the original Vidra
// operator are kept so its manifests apply unchanged; every field added since is optional.
//
// +kubebuilder:object:generate=true
// +groupName=infrahub.operators.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "infrahub.operators.com", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
