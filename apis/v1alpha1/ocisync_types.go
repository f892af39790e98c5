package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OCIRef says which artifact of a repository to deliver: at most one field; none is the
// tag latest.
// +kubebuilder:validation:XValidation:rule="[has(self.tag), has(self.semver), has(self.digest)].filter(x, x).size() <= 1",message="set at most one of tag, semver and digest"
type OCIRef struct {
	// Tag to deliver.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Tag string `json:"tag,omitempty"`
	// SemVer delivers the newest tag matching this range.
	// +optional
	// +kubebuilder:validation:MaxLength=250
	SemVer string `json:"semver,omitempty"`
	// Digest delivers this manifest digest (sha256:<64 hex>).
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Digest string `json:"digest,omitempty"`
}

// OCISource is the artifact and directory an OCISync delivers.
type OCISource struct {
	// URL of the repository: oci://registry/repository.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('oci://')",message="url must be an oci:// URL, such as oci://ghcr.io/org/manifests"
	URL string `json:"url"`

	// Ref names the artifact; none is the tag latest.
	// +optional
	Ref *OCIRef `json:"ref,omitempty"`

	// Path is the directory of the artifact's content to deliver (default: its root), read
	// as a GitSync reads its path.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="path stays inside the artifact: no '..'"
	Path string `json:"path,omitempty"`

	// SecretRef names a Secret in the operator's namespace with username and password.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`

	// CASecretRef names a Secret in the operator's namespace whose ca.crt is a PEM CA
	// bundle the registry's certificate is verified against, in addition to the system's.
	// +optional
	CASecretRef *LocalSecretReference `json:"caSecretRef,omitempty"`

	// InsecureAllowHTTP allows a registry that speaks plain HTTP.
	// +optional
	InsecureAllowHTTP bool `json:"insecureAllowHTTP,omitempty"`
}

// OCISyncSpec delivers an OCI artifact's manifests to the fleet.
type OCISyncSpec struct {
	// Source is the artifact and directory.
	Source OCISource `json:"source"`

	// PostBuild substitutes variables in the bundle built, for each cluster: the
	// sync's own, and the cluster's name and labels.
	// +optional
	PostBuild *PostBuild `json:"postBuild,omitempty"`

	// Decryption decrypts the bundle's SOPS-encrypted documents, before postBuild.
	// +optional
	Decryption *Decryption `json:"decryption,omitempty"`

	SyncOptions `json:",inline"`
}

// OCISync delivers the manifests of an OCI artifact (as flux push artifact writes it, or
// any single tar+gzip layer) to its destination clusters.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="the name of an OCISync is at most 63 characters: it labels the VidraResources it makes"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ocis,categories=vidra
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.source.url`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.source.revision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OCISync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OCISyncSpec      `json:"spec,omitempty"`
	Status SourceSyncStatus `json:"status,omitempty"`
}

// OCISyncList is a list of OCISyncs.
// +kubebuilder:object:root=true
type OCISyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OCISync `json:"items"`
}
