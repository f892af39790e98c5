// Package v1alpha1 holds the Vidra API: InfrahubSync, VidraResource and VidraCluster in
// the group infrahub.operators.com. The group, kinds and JSON names of the original Vidra
// operator are kept so its manifests apply unchanged; every field added since is optional.
//
// +kubebuilder:object:generate=true
// +groupName=infrahub.operators.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "infrahub.operators.com", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&InfrahubSync{}, &InfrahubSyncList{},
		&GitSync{}, &GitSyncList{},
		&OCISync{}, &OCISyncList{},
		&HelmSync{}, &HelmSyncList{},
		&VidraResource{}, &VidraResourceList{},
		&VidraCluster{}, &VidraClusterList{},
		&VidraBundle{}, &VidraBundleList{},
		&AlertProvider{}, &AlertProviderList{},
		&Alert{}, &AlertList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
