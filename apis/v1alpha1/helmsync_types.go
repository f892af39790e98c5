package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HelmSource is the chart a HelmSync delivers.
type HelmSource struct {
	// RepoURL is a Helm repository (https://, serving index.yaml; http:// only with
	// insecureAllowHTTP) or an OCI registry (oci://registry/path, the chart being
	// oci://registry/path/CHART).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('oci://') || self.startsWith('http://')",message="repoURL must be an https://, oci:// or (with insecureAllowHTTP) http:// URL"
	RepoURL string `json:"repoURL"`

	// Chart is the chart's name in the repository.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=250
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	Chart string `json:"chart"`

	// Version is an exact version or a semver range, such as ">=1.2.0 <2.0.0": the newest
	// match. Empty: the newest stable version (no prerelease).
	// +optional
	// +kubebuilder:validation:MaxLength=250
	Version string `json:"version,omitempty"`

	// SecretRef names a Secret in the operator's namespace with username and password,
	// for the repository (its own host only) or the registry.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`

	// CASecretRef names a Secret in the operator's namespace whose ca.crt is a PEM CA
	// bundle the server's certificate is verified against, in addition to the system's.
	// +optional
	CASecretRef *LocalSecretReference `json:"caSecretRef,omitempty"`

	// InsecureAllowHTTP allows a plain http:// repository, or a registry that speaks
	// plain HTTP.
	// +optional
	InsecureAllowHTTP bool `json:"insecureAllowHTTP,omitempty"`
}

// HelmRelease names the release a chart is rendered as.
type HelmRelease struct {
	// Name is .Release.Name (default: the HelmSync's name).
	// +optional
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// Namespace is .Release.Namespace, and where the chart's namespaced objects without
	// a namespace go (default: the destination's namespace, else "default").
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
}

// ValuesReference names values held in a ConfigMap or a Secret of the operator's
// namespace.
type ValuesReference struct {
	// Kind is ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	// Name of the ConfigMap or Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key holding a values document (default values.yaml).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// HelmSyncSpec delivers a Helm chart, rendered for each destination cluster.
type HelmSyncSpec struct {
	// Source is the chart.
	Source HelmSource `json:"source"`

	// Release names the release the chart is rendered as.
	// +optional
	Release HelmRelease `json:"release,omitempty"`

	// Values are the chart's values, merged over those of valuesFrom. ${cluster.name} and
	// ${cluster.labels.KEY} in any string are replaced for each destination cluster.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Values *apiextensionsv1.JSON `json:"values,omitempty"`

	// ValuesFrom are values documents merged in order, before values.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	ValuesFrom []ValuesReference `json:"valuesFrom,omitempty"`

	// IncludeCRDs delivers the chart's crds/ first, and upgrades them with the chart.
	// +optional
	// +kubebuilder:default=true
	IncludeCRDs *bool `json:"includeCRDs,omitempty"`

	SyncOptions `json:",inline"`
}

// HelmSync delivers a Helm chart from a repository or an OCI registry to its destination
// clusters, rendered for each as it is: its Kubernetes version and APIs.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="the name of a HelmSync is at most 63 characters: it labels the VidraResources it makes"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=hs,categories=vidra
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.spec.source.repoURL`
// +kubebuilder:printcolumn:name="Chart",type=string,JSONPath=`.spec.source.chart`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.source.revision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HelmSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HelmSyncSpec     `json:"spec,omitempty"`
	Status SourceSyncStatus `json:"status,omitempty"`
}

// HelmSyncList is a list of HelmSyncs.
// +kubebuilder:object:root=true
type HelmSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HelmSync `json:"items"`
}
