package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GitRef says which commit of a repository to deliver: at most one field; none is the
// remote's HEAD (its default branch).
// +kubebuilder:validation:XValidation:rule="[has(self.branch), has(self.tag), has(self.semver), has(self.commit), has(self.name)].filter(x, x).size() <= 1",message="set at most one of branch, tag, semver, commit and name"
type GitRef struct {
	// Branch to follow.
	// +optional
	// +kubebuilder:validation:MaxLength=250
	Branch string `json:"branch,omitempty"`
	// Tag to deliver.
	// +optional
	// +kubebuilder:validation:MaxLength=250
	Tag string `json:"tag,omitempty"`
	// SemVer delivers the newest tag matching this range, such as ">=1.2.0 <2.0.0".
	// +optional
	// +kubebuilder:validation:MaxLength=250
	SemVer string `json:"semver,omitempty"`
	// Commit delivers this commit (40 hex digits).
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}$`
	Commit string `json:"commit,omitempty"`
	// Name is a full reference name, as Flux's: refs/heads/main, refs/pull/420/head,
	// refs/merge-requests/1/head.
	// +optional
	// +kubebuilder:validation:MaxLength=250
	// +kubebuilder:validation:XValidation:rule="self.startsWith('refs/') && !self.contains('..') && !self.contains(' ')",message="name is a full Git reference name, such as refs/pull/420/head"
	Name string `json:"name,omitempty"`
}

// Previews say which refs' commits a sync previews before they merge: built as a
// merge would build them, dry-run on every cluster the sync reaches, applied nowhere.
type Previews struct {
	// Refs are the full reference names previewed, as globs whose * stops at a slash:
	// refs/heads/preview/*, refs/pull/*/head, refs/merge-requests/*/head.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=250
	// +kubebuilder:validation:items:Pattern=`^refs/`
	Refs []string `json:"refs"`
	// MaxRefs bounds the refs previewed at once: past it, the first in name order are
	// previewed, and the status says how many were left out.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MaxRefs int32 `json:"maxRefs,omitempty"`
}

// GitSource is the repository, revision and directory a GitSync delivers.
type GitSource struct {
	// URL of the repository: https:// or ssh:// (http:// only with insecureAllowHTTP).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('ssh://') || self.startsWith('http://')",message="url must be an https://, ssh:// or (with insecureAllowHTTP) http:// URL"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#') && !self.contains('\\\\')",message="url has no query (?), fragment (#) or backslash: a repository is named by scheme, host and path alone, and credentials go in secretRef"
	URL string `json:"url"`

	// Ref names the revision; none is the remote's HEAD.
	// +optional
	Ref *GitRef `json:"ref,omitempty"`

	// Path is the directory of the repository to deliver (default: its root). A directory
	// holding kustomization.yaml is built with Kustomize; otherwise every *.yaml, *.yml
	// and *.json under it, in path order, is the bundle.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..')",message="path stays inside the repository: no '..'"
	Path string `json:"path,omitempty"`

	// SecretRef names a Secret in the operator's namespace with username and password,
	// or bearerToken, or (ssh://) identity and known_hosts.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`

	// CASecretRef names a Secret in the operator's namespace whose ca.crt is a PEM CA
	// bundle the server's certificate is verified against, in addition to the system's.
	// +optional
	CASecretRef *LocalSecretReference `json:"caSecretRef,omitempty"`

	// InsecureAllowHTTP allows a plain http:// url.
	// +optional
	InsecureAllowHTTP bool `json:"insecureAllowHTTP,omitempty"`
}

// GitSyncSpec delivers a directory of a Git repository to the fleet.
type GitSyncSpec struct {
	// Source is the repository, revision and directory.
	Source GitSource `json:"source"`

	// PostBuild substitutes variables in the bundle built, for each cluster: the
	// sync's own, and the cluster's name and labels.
	// +optional
	PostBuild *PostBuild `json:"postBuild,omitempty"`

	// Decryption decrypts the bundle's SOPS-encrypted documents, before postBuild.
	// +optional
	Decryption *Decryption `json:"decryption,omitempty"`

	// Previews dry-run the commits of other refs (branches, pull requests) on every
	// cluster the sync reaches, before they merge; nothing of them is applied.
	// +optional
	Previews *Previews `json:"previews,omitempty"`

	SyncOptions `json:",inline"`
}

// GitSync delivers the manifests of a directory of a Git repository, at a branch, tag,
// semver range or commit, to its destination clusters.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="the name of a GitSync is at most 63 characters: it labels the VidraResources it makes"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gs,categories=vidra
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.source.url`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.source.path`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.source.revision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GitSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GitSyncSpec      `json:"spec,omitempty"`
	Status SourceSyncStatus `json:"status,omitempty"`
}

// GitSyncList is a list of GitSyncs.
// +kubebuilder:object:root=true
type GitSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GitSync `json:"items"`
}
