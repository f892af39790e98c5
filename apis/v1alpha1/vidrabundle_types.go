package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VidraBundle is a VidraResource as the agent of a pull cluster receives it: the hub
// keeps one in the cluster's own namespace for every VidraResource that delivers there,
// and the agent, which may read only that namespace, applies it on its member and writes
// back its status. Its spec is the VidraResource's; nobody but the operator writes it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=vb
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.DeployState`
// +kubebuilder:printcolumn:name="Resources",type=integer,JSONPath=`.status.resourceCount`
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VidraBundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VidraResourceSpec `json:"spec,omitempty"`
	Status VidraBundleStatus `json:"status,omitempty"`
}

// VidraBundleStatus is the agent's report of the bundle on its member: the status of
// the VidraResource it keeps there, and whether it let go of the bundle's objects.
type VidraBundleStatus struct {
	VidraResourceStatus `json:",inline"`

	// HubGeneration is the VidraResource generation the status describes (the
	// VidraResource's, on the hub, not this object's).
	// +optional
	HubGeneration int64 `json:"hubGeneration,omitempty"`

	// Released: the agent deleted its copy and released every object of it; the hub may
	// let the VidraResource go.
	// +optional
	Released bool `json:"released,omitempty"`
}

// VidraBundleList is a list of VidraBundles.
// +kubebuilder:object:root=true
type VidraBundleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VidraBundle `json:"items"`
}
