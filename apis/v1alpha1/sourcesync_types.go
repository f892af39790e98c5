package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalSecretReference names a Secret in the operator's namespace: a sync never reads a
// Secret anywhere else, so anyone who may write a sync cannot send another namespace's
// credentials to a URL of their choosing.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SyncDestination says where the VidraResources of a sync deliver: one cluster (cluster,
// server, or neither for the local cluster), or every enrolled cluster whose VidraCluster
// matches clusterSelector.
// +kubebuilder:validation:XValidation:rule="[has(self.cluster), has(self.server), has(self.clusterSelector)].filter(x, x).size() <= 1",message="set at most one of cluster, server and clusterSelector"
type SyncDestination struct {
	Destination `json:",inline"`

	// ClusterSelector fans the bundle out to every enrolled cluster whose VidraCluster
	// labels match; clusters joining or leaving the selection get or lose theirs.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
}

// SyncOptions are what every sync of a source (Git, OCI) shares with InfrahubSync: where
// its bundle goes, how often it is looked at, and how a new revision rolls out.
type SyncOptions struct {
	// Destination is where the bundle is delivered.
	// +optional
	Destination SyncDestination `json:"destination,omitempty"`

	// Interval is how often the source is asked for its revision; only a new revision is
	// downloaded. A push webhook, when configured, triggers a sync at once.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="interval must be a duration of at least 1s, such as 1m or 30s"
	Interval *metav1.Duration `json:"interval,omitempty"`

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

	// Rollout says how a new revision moves across the clusters: all at once (the
	// default), or wave by wave with a health gate.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// Template sets fields of every VidraResource the sync makes.
	// +optional
	Template *VidraResourceTemplate `json:"template,omitempty"`
}

// SourceStatus is what a sync last fetched from its source.
type SourceStatus struct {
	// Revision is what was fetched, for people: main@sha1:<commit> for Git,
	// <tag>@sha256:<digest> for OCI.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Digest is the sha256 of the bundle delivered from that revision.
	// +optional
	Digest string `json:"digest,omitempty"`
	// FetchedAt is when that revision was fetched.
	// +optional
	FetchedAt *metav1.Time `json:"fetchedAt,omitempty"`
	// Message says why the newest revision is not delivered, if it is not.
	// +optional
	Message string `json:"message,omitempty"`
	// Key identifies the fetched revision and what was built of it (URL, revision, path),
	// so that an unchanged revision is never fetched again, across restarts too.
	// +optional
	Key string `json:"key,omitempty"`
}

// SourceSyncStatus is what Vidra observed of a GitSync or an OCISync.
type SourceSyncStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling and Stalled, with kstatus semantics; RolledOut with a
	// progressive rollout.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastSyncTime is when the source was last asked for its revision successfully.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// Source is the revision last fetched.
	// +optional
	Source *SourceStatus `json:"source,omitempty"`

	// Bundles delivered, with the VidraResources made for them (one per cluster).
	// +optional
	// +listType=map
	// +listMapKey=id
	Bundles []BundleStatus `json:"bundles,omitempty"`

	// Rollout is where the newest revision stands.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// Clusters counts the clusters the sync delivers to by the state of its
	// VidraResources there, at its current revision (none with wait: false).
	// +optional
	Clusters *ClusterCounts `json:"clusters,omitempty"`

	// Previews are what the commits of the refs spec.previews names would do on each
	// cluster, one per ref.
	// +optional
	// +listType=map
	// +listMapKey=ref
	// +kubebuilder:validation:MaxItems=20
	Previews []RefPreview `json:"previews,omitempty"`
}

// RefPreview is what one ref's commit would change on the clusters a sync reaches.
type RefPreview struct {
	// Ref is the full reference name (a GitSync's), or the branch (an InfrahubSync's).
	Ref string `json:"ref"`
	// Revision is the commit previewed, as ref@sha1:<commit>; for an InfrahubSync, the
	// branch's listing, as branch@sha256:<digest of its artifacts' ids and checksums>.
	Revision string `json:"revision"`
	// ComputedAt is when it was previewed.
	// +optional
	ComputedAt *metav1.Time `json:"computedAt,omitempty"`
	// Clusters is how many clusters it was dry-run on; Changed how many of them it
	// changes; Refused how many refuse it (their delivery policy, the API server's
	// dry-run, the requester's right).
	Clusters int32 `json:"clusters"`
	Changed  int32 `json:"changed"`
	Refused  int32 `json:"refused"`
	// Added, Updated and Removed count the objects it would create, change and prune,
	// on every cluster together.
	Added   int32 `json:"added"`
	Updated int32 `json:"updated"`
	Removed int32 `json:"removed"`
	// Message says why it could not be previewed, or what was left out.
	// +optional
	Message string `json:"message,omitempty"`
	// Digest names, in the content store, the preview of each cluster with its diffs,
	// which kubectl vidra preview shows.
	// +optional
	Digest string `json:"digest,omitempty"`
}

// BundleStatus records one bundle a sync delivers: an InfrahubSync's artifact, a GitSync's
// or an OCISync's revision, a HelmSync's rendering for one cluster.
type BundleStatus struct {
	// ID names the bundle across revisions: an artifact's Infrahub node ID; the kind of a
	// GitSync or an OCISync; a HelmSync's kind and cluster.
	ID string `json:"id"`
	// Name of the artifact, or of the sync.
	// +optional
	Name string `json:"name,omitempty"`
	// Target is the display label of the node an artifact was rendered for.
	// +optional
	Target string `json:"target,omitempty"`
	// Revision is the source's revision the bundle comes from: a GitSync's branch and
	// commit, an OCISync's tag and digest, a HelmSync's chart version. (Earlier
	// versions wrote it as the target.)
	// +optional
	Revision string `json:"revision,omitempty"`
	// Definition is the name of an artifact's definition.
	// +optional
	Definition string `json:"definition,omitempty"`
	// Checksum of the content delivered to the VidraResources (MD5, as Infrahub reports
	// it for an artifact).
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// Digest names the checksum's content in the content store, where a progressive
	// rollout keeps it while clusters wait for their wave.
	// +optional
	Digest string `json:"digest,omitempty"`
	// StableChecksum and StableDigest are the bundle's content in the last revision
	// whose rollout completed: what clusters joining the selection get, and where a
	// rollback returns.
	// +optional
	StableChecksum string `json:"stableChecksum,omitempty"`
	// +optional
	StableDigest string `json:"stableDigest,omitempty"`
	// BuiltFrom identifies what the latest content was built from, for a sync that builds
	// it for each cluster (a HelmSync: the chart, the values and the cluster's version and
	// APIs): the same inputs are not built again.
	// +optional
	BuiltFrom string `json:"builtFrom,omitempty"`
	// Message says why the bundle's latest content is not delivered, if it is not.
	// +optional
	Message string `json:"message,omitempty"`
	// VidraResources generated from the bundle, one per destination cluster: at most
	// ten, so that the status does not grow with the fleet (an object on the hub holds
	// at most 1.5 MiB). `kubectl vidra rollout status` lists them all.
	// +optional
	VidraResources []string `json:"vidraResources,omitempty"`
	// VidraResourceCount is how many VidraResources deliver the bundle.
	// +optional
	VidraResourceCount int32 `json:"vidraResourceCount,omitempty"`
}

// ClusterPreview is what a ref's commit would do on one cluster. A RefPreview's Digest
// names, in the content store, the JSON list of them, which kubectl vidra preview shows.
type ClusterPreview struct {
	// Cluster is the cluster dry-run on.
	Cluster string `json:"cluster"`
	// VidraResource is the sync's VidraResource there, whose delivery it is compared
	// with.
	// +optional
	VidraResource string `json:"vidraResource,omitempty"`
	// Preview is the dry-run's result, as a VidraResource's status.preview says it.
	// +optional
	Preview *PreviewStatus `json:"preview,omitempty"`
	// Skipped says why the cluster was not dry-run: the sync delivered nothing there yet
	// (a preview compares with what was delivered), or the cluster pulls its bundles and
	// the hub does not reach it. A skipped cluster is counted neither as changing nor as
	// refusing.
	// +optional
	Skipped string `json:"skipped,omitempty"`
}
