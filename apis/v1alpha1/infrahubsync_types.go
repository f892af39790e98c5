package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InfrahubSyncSource says which Infrahub artifacts to pull, from which branch and point in
// time.
type InfrahubSyncSource struct {
	// InfrahubAPIURL is the base URL of Infrahub, such as https://infrahub.example.com.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="infrahubAPIURL must be an http or https URL with a host, such as https://infrahub.example.com"
	InfrahubAPIURL string `json:"infrahubAPIURL"`

	// TargetBranch is the Infrahub branch to read.
	// +optional
	// +kubebuilder:default=main
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=250
	TargetBranch string `json:"targetBranch,omitempty"`

	// TargetDate reads Infrahub as it was at that time: RFC 3339 (2025-01-01T00:00:00Z) or
	// relative to now (now-30m, now-2h, now-1d). Empty reads the latest state.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^now-[0-9]+[smhd]$') || self.matches('^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$')",message="targetDate must be an RFC 3339 time such as 2025-01-01T00:00:00Z or relative to now such as now-30m, now-2h or now-1d"
	TargetDate string `json:"targetDate,omitempty"`

	// ArtefactName is the name of the Infrahub artifacts to deliver (the original Vidra's
	// spelling). Every artifact of that name, one per target, is pulled.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ArtefactName string `json:"artefactName"`

	// QueryName, when set, lists the artifacts through this Infrahub stored query instead
	// of GraphQL by name, as the original Vidra did with its ArtifactIDs query. The query
	// receives the variable artifactname and must return CoreArtifact edges.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	QueryName string `json:"queryName,omitempty"`

	// CredentialsSecretRef names a Secret, in the operator's namespace, with either apiToken
	// or username and password. Without it, a Secret in the operator's namespace labeled
	// infrahub-api-url=<Infrahub host> is used (as the original Vidra did), and without
	// that Infrahub is read anonymously.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// CASecretRef names a Secret, in the operator's namespace, whose ca.crt is the PEM CA
	// bundle that Infrahub's certificate is verified against, in addition to the system's.
	// +optional
	CASecretRef *SecretReference `json:"caSecretRef,omitempty"`

	// InsecureAllowHTTP allows a plain http:// infrahubAPIURL. Without it such a URL is
	// refused, because credentials and artifacts would cross the network in clear.
	// +optional
	InsecureAllowHTTP bool `json:"insecureAllowHTTP,omitempty"`
}

// InfrahubSyncDestination says where the VidraResources made from the artifacts deliver:
// one cluster (cluster, server, or neither for the local cluster), every enrolled cluster
// whose VidraCluster matches clusterSelector, or, with clusterFromTarget, the cluster that
// each artifact's target names.
// +kubebuilder:validation:XValidation:rule="[has(self.cluster), has(self.server), has(self.clusterSelector), has(self.clusterFromTarget) && self.clusterFromTarget].filter(x, x).size() <= 1",message="set at most one of cluster, server, clusterSelector and clusterFromTarget"
type InfrahubSyncDestination struct {
	Destination `json:",inline"`

	// ClusterSelector fans the artifacts out to every enrolled cluster whose VidraCluster
	// labels match; clusters joining or leaving the selection get or lose theirs.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// ClusterFromTarget delivers each artifact to the enrolled cluster named by the display
	// label of the artifact's target node in Infrahub, so the source of truth decides
	// where each artifact goes.
	// +optional
	ClusterFromTarget bool `json:"clusterFromTarget,omitempty"`
}

// InfrahubSyncSpec pulls artifacts from Infrahub and delivers them to the fleet.
type InfrahubSyncSpec struct {
	// Source is where in Infrahub the artifacts come from.
	Source InfrahubSyncSource `json:"source"`

	// Destination is where the artifacts are delivered.
	// +optional
	Destination InfrahubSyncDestination `json:"destination,omitempty"`

	// Interval is how often Infrahub is polled for changed artifacts. Infrahub's webhooks,
	// when configured, trigger a sync at once.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="interval must be a duration of at least 1s, such as 1m or 30s"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// AllowEmpty lets a listing that finds no artifact at all remove every VidraResource
	// of the sync. Without it such a listing removes nothing, so that a typo in
	// artefactName or an emptied branch never wipes a fleet.
	// +optional
	AllowEmpty bool `json:"allowEmpty,omitempty"`

	// Suspend stops syncing; the VidraResources already made stay as they are.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Wait makes Ready mean that the bundles are in effect: every VidraResource of the
	// sync Ready at its current revision, on every cluster it reaches (the default, as
	// Flux's HelmRelease waits). false: Ready once they are written, as the original
	// Vidra API meant (Flux's Kustomization spec.wait, whose default is false).
	// +optional
	// +kubebuilder:default=true
	Wait *bool `json:"wait,omitempty"`

	// DependsOn names syncs this one waits for, cluster by cluster: its VidraResource on
	// a cluster applies only once each dependency's VidraResources there are Ready at
	// that sync's current revision; other clusters go on.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	DependsOn []SyncReference `json:"dependsOn,omitempty"`

	// HealthCheckExprs tell the health of objects of the kinds they name with CEL, as
	// Flux's: for kinds whose status kstatus cannot read. An expression that does not
	// compile stalls the sync, naming it.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	HealthCheckExprs []HealthCheck `json:"healthCheckExprs,omitempty"`

	// Timeout bounds how long an object may stay in progress once its VidraResource
	// applied a new spec: past it, the object has failed (HealthCheckFailed). None: it
	// may take as long as it takes.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="timeout must be a duration of at least 1s, such as 5m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Rollout says how a new revision of the content moves across the clusters: all at
	// once (the default), or wave by wave with a health gate.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// Previews dry-run other Infrahub branches, where proposed changes live, on every
	// cluster the sync reaches, as targetBranch would deliver them once merged; nothing
	// is applied.
	// +optional
	Previews *BranchPreviews `json:"previews,omitempty"`

	// Template sets fields of every VidraResource the sync makes. Fields it leaves unset
	// keep the VidraResource's own value (its default, or what someone set).
	// +optional
	Template *VidraResourceTemplate `json:"template,omitempty"`
}

// BranchPreviews say which Infrahub branches an InfrahubSync previews before they merge.
type BranchPreviews struct {
	// Branches are the branch names previewed, as globs whose * stops at a slash:
	// feature-*, change/*. The sync's own targetBranch is never previewed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=250
	Branches []string `json:"branches"`
	// MaxBranches bounds the branches previewed at once: past it, the first in name
	// order are previewed, and the status says how many were left out.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MaxBranches int32 `json:"maxBranches,omitempty"`
}

// VidraResourceTemplate is what an InfrahubSync sets on the VidraResources it makes,
// beside their destination and manifest.
type VidraResourceTemplate struct {
	// Labels added to every VidraResource.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to every VidraResource.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Prune, AdoptExisting, ServiceAccountName and VMRollout are those of a VidraResource.
	// +optional
	Prune *bool `json:"prune,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum=Never;Always
	AdoptExisting AdoptionPolicy `json:"adoptExisting,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// +optional
	VMRollout *VMRolloutSpec `json:"vmRollout,omitempty"`
	// DryRun is that of a VidraResource: every VidraResource previews its bundle and
	// applies nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// HistoryLimit is that of a VidraResource.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	HistoryLimit *int32 `json:"historyLimit,omitempty"`
}

// InfrahubSyncStatus is what Vidra observed of an InfrahubSync.
type InfrahubSyncStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling and Stalled, with kstatus semantics.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Checksums of the artifacts last delivered (kept from the original Vidra API).
	// +optional
	Checksums []string `json:"checksums,omitempty"`

	// SyncState is the original Vidra's coarse state of the sync.
	// +optional
	SyncState State `json:"syncState,omitempty"`

	// LastError is the last error met, empty once a sync succeeds.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// LastSyncTime is when artifacts were last listed successfully.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// Artifacts pulled in the last successful sync.
	// +optional
	// +listType=map
	// +listMapKey=id
	Artifacts []BundleStatus `json:"artifacts,omitempty"`

	// Rollout is where the newest revision of the content stands.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// Clusters counts the clusters the sync delivers to by the state of its
	// VidraResources there, at its current revision (none with wait: false).
	// +optional
	Clusters *ClusterCounts `json:"clusters,omitempty"`

	// Previews are what the branches of spec.previews would do, by branch: each
	// branch's listing (its revision) dry-run on every cluster the sync reaches.
	// +optional
	// +listType=map
	// +listMapKey=ref
	// +kubebuilder:validation:MaxItems=20
	Previews []RefPreview `json:"previews,omitempty"`
}

// InfrahubSync pulls artifacts (rendered manifests) from Infrahub and turns each into
// VidraResources on its destination clusters.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="the name of an InfrahubSync is at most 63 characters: it labels the VidraResources it makes"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ihs,categories=vidra
// +kubebuilder:printcolumn:name="Artifact",type=string,JSONPath=`.spec.source.artefactName`
// +kubebuilder:printcolumn:name="Branch",type=string,JSONPath=`.spec.source.targetBranch`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.syncState`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.rollout.revision`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout.phase`
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InfrahubSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InfrahubSyncSpec   `json:"spec,omitempty"`
	Status InfrahubSyncStatus `json:"status,omitempty"`
}

// InfrahubSyncList is a list of InfrahubSyncs.
// +kubebuilder:object:root=true
type InfrahubSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InfrahubSync `json:"items"`
}
