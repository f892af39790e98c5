package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// AdoptionPolicy says what Vidra does with an object that already exists on the
// destination but that no VidraResource owns.
// +kubebuilder:validation:Enum=Never;Always
type AdoptionPolicy string

// Adoption policies.
const (
	// AdoptNever leaves unowned objects untouched and reports a conflict.
	AdoptNever AdoptionPolicy = "Never"
	// AdoptAlways takes unowned objects over.
	AdoptAlways AdoptionPolicy = "Always"
)

// VMRolloutStrategy says how VirtualMachines whose new spec needs a restart are restarted.
// +kubebuilder:validation:Enum=Rolling;Immediate;Manual
type VMRolloutStrategy string

// VM rollout strategies.
const (
	// VMRolloutRolling restarts at most maxUnavailable VMs at a time.
	VMRolloutRolling VMRolloutStrategy = "Rolling"
	// VMRolloutImmediate restarts every VM that needs it at once.
	VMRolloutImmediate VMRolloutStrategy = "Immediate"
	// VMRolloutManual restarts nothing and only reports the VMs that need a restart.
	VMRolloutManual VMRolloutStrategy = "Manual"
)

// VMRolloutSpec tunes how KubeVirt VirtualMachines applied by a VidraResource are
// restarted when their new spec needs it.
type VMRolloutSpec struct {
	// Strategy is Rolling (default), Immediate or Manual.
	// +optional
	// +kubebuilder:default=Rolling
	Strategy VMRolloutStrategy `json:"strategy,omitempty"`

	// MaxUnavailable is how many VMs may be unavailable at once during a Rolling rollout:
	// a number (at least 1) or a percentage of the VMs (1% to 100%, rounded up).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// ReadyTimeout is how long a restarted VM has to come back Ready before the rollout
	// pauses.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="readyTimeout must be a positive duration such as 10m or 1h30m"
	ReadyTimeout *metav1.Duration `json:"readyTimeout,omitempty"`
}

// ContentReference names stored content by its digest.
type ContentReference struct {
	// Digest of the uncompressed manifest: "sha256:" and 64 lower-case hex digits.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest"`
}

// PendingContent is a bundle waiting to be delivered: inline, or in the content store.
// +kubebuilder:validation:XValidation:rule="!(has(self.manifest) && size(self.manifest) > 0 && has(self.content))",message="set manifest or content, not both"
type PendingContent struct {
	// Manifest holds the objects, as spec.manifest does.
	// +optional
	Manifest string `json:"manifest,omitempty"`
	// Content names stored content, as spec.content does.
	// +optional
	Content *ContentReference `json:"content,omitempty"`
	// Revision says which revision it is, for people (an InfrahubSync's revision).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Revision string `json:"revision,omitempty"`
}

// PreviewAction is what delivering a bundle would do to one object.
// +kubebuilder:validation:Enum=Create;Update;Unchanged;Prune;Release;NotManaged;Failed
type PreviewAction string

// Preview actions.
const (
	PreviewCreate     PreviewAction = "Create"
	PreviewUpdate     PreviewAction = "Update"
	PreviewUnchanged  PreviewAction = "Unchanged"
	PreviewPrune      PreviewAction = "Prune"
	PreviewRelease    PreviewAction = "Release"
	PreviewNotManaged PreviewAction = "NotManaged"
	PreviewFailed     PreviewAction = "Failed"
)

// PreviewChange is what delivering the previewed bundle would do to one object.
type PreviewChange struct {
	// Action: Create, Update, Prune (deleted: no other owner uses it), Release (another
	// owner keeps it), NotManaged (exists and is not Vidra's: left alone), Failed (the
	// dry-run was refused; Message says why).
	Action PreviewAction `json:"action"`
	// APIVersion, Kind, Namespace and Name identify the object.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Diff is, for an update, a unified diff of the object's YAML as it is and as it
	// would be (Secret values redacted), truncated when long.
	// +optional
	Diff string `json:"diff,omitempty"`
	// Message says why a dry-run failed, or what was not checked.
	// +optional
	Message string `json:"message,omitempty"`
}

// PreviewStatus is what delivering a bundle would do on the destination, computed by
// server-side dry-run: admission, defaults and other field managers are accounted for.
type PreviewStatus struct {
	// Digest of the previewed bundle.
	Digest string `json:"digest,omitempty"`
	// Revision of the previewed bundle, when it is a pending revision.
	// +optional
	Revision string `json:"revision,omitempty"`
	// ObservedGeneration is the generation the preview was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ComputedAt is when the destination was asked.
	// +optional
	ComputedAt *metav1.Time `json:"computedAt,omitempty"`
	// Counts of objects by what would happen to them.
	// +optional
	Create int32 `json:"create,omitempty"`
	// +optional
	Update int32 `json:"update,omitempty"`
	// +optional
	Prune int32 `json:"prune,omitempty"`
	// +optional
	Unchanged int32 `json:"unchanged,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Changes lists the objects that would not stay unchanged (at most 100).
	// +optional
	Changes []PreviewChange `json:"changes,omitempty"`
	// Message says what the preview left out, or why it could not be computed.
	// +optional
	Message string `json:"message,omitempty"`
}

// VidraResourceSpec is one manifest bundle for one destination cluster.
// +kubebuilder:validation:XValidation:rule="!(has(self.manifest) && size(self.manifest) > 0 && has(self.content))",message="set manifest or content, not both"
type VidraResourceSpec struct {
	// Destination is the cluster the objects go to and the default namespace. The cluster
	// is fixed: moving it would leave what was delivered on the old cluster, owned by
	// nobody who still looks after it.
	// +optional
	// +kubebuilder:default={}
	// +kubebuilder:validation:XValidation:rule="(has(self.cluster) ? self.cluster : '') == (has(oldSelf.cluster) ? oldSelf.cluster : '') && (has(self.server) ? self.server : '') == (has(oldSelf.server) ? oldSelf.server : '')",message="spec.destination.cluster and spec.destination.server cannot change: what this VidraResource delivered would stay on the old cluster. Create a new VidraResource for the new cluster, then delete this one (it releases what it delivered)"
	Destination Destination `json:"destination,omitempty"`

	// Manifest holds the objects to apply: multi-document YAML or JSON; List kinds are
	// expanded.
	// +optional
	Manifest string `json:"manifest,omitempty"`

	// Content names a bundle kept in Vidra's content store on the hub instead of inline,
	// for bundles larger than the API server takes in one object (`kubectl vidra upload`
	// stores one; InfrahubSync stores large artifacts there). Set manifest or content,
	// not both.
	// +optional
	Content *ContentReference `json:"content,omitempty"`

	// ReconcileOnEvents is the original Vidra's spec-level switch; destination.reconcileOnEvents
	// is preferred. Either being true enables event-driven repair.
	// +optional
	ReconcileOnEvents bool `json:"reconcileOnEvents,omitempty"`

	// ReconciledAt is kept for compatibility with the original Vidra API; it is not read.
	// +optional
	ReconciledAt *metav1.Time `json:"reconciledAt,omitempty"`

	// Prune deletes objects that leave the manifest, once no other owner declares them.
	// With false they are released without being deleted.
	// +optional
	// +kubebuilder:default=true
	Prune *bool `json:"prune,omitempty"`

	// Suspend stops applying and pruning until it is false again.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// HealthCheckExprs tell the health of objects of the kinds they name with CEL, as
	// Flux's Kustomization's (a sync writes its own here); other kinds by kstatus.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	HealthCheckExprs []HealthCheck `json:"healthCheckExprs,omitempty"`

	// Timeout bounds how long an object may stay in progress once a new spec is applied:
	// past it, it has failed. None: no bound.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="timeout must be a duration of at least 1s, such as 5m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// DependsOn names syncs whose VidraResources on this one's cluster must be Ready, at
	// their sync's current revision, before a new spec of this one is applied (a sync
	// writes its spec.dependsOn here). What it applied before stays, and is repaired.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(d, has(d.kind))",message="each of dependsOn names the kind of its sync"
	DependsOn []SyncReference `json:"dependsOn,omitempty"`

	// ServiceAccountName is impersonated for every request on the destination cluster, so
	// the bundle gets only that service account's rights there.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// AdoptExisting says whether objects that exist but that Vidra does not own are taken
	// over (Always) or left untouched and reported (Never, the default).
	// +optional
	// +kubebuilder:default=Never
	AdoptExisting AdoptionPolicy `json:"adoptExisting,omitempty"`

	// VMRollout tunes the restart of KubeVirt VirtualMachines of this bundle.
	// +optional
	VMRollout *VMRolloutSpec `json:"vmRollout,omitempty"`

	// DryRun computes the preview of the bundle (status.preview: what applying it would
	// create, update and prune, by server-side dry-run on the destination) and applies
	// nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Preview is content waiting to be delivered here (a progressive rollout sets it on
	// clusters whose wave is not reached yet): its preview is computed into
	// status.preview, and nothing of it is applied.
	// +optional
	Preview *PendingContent `json:"preview,omitempty"`

	// HistoryLimit is how many delivered revisions are kept as ControllerRevisions in the
	// operator's namespace, for kubectl vidra history and rollback. 0 keeps none.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	HistoryLimit *int32 `json:"historyLimit,omitempty"`
}

// ManagedResource identifies one object a VidraResource owns on its cluster.
type ManagedResource struct {
	// Kind of the object, such as Deployment.
	Kind string `json:"kind,omitempty"`
	// APIVersion of the object, such as apps/v1.
	APIVersion string `json:"apiVersion,omitempty"`
	// Name of the object.
	Name string `json:"name,omitempty"`
	// Namespace of the object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Status of the object on its cluster by kstatus (Current, InProgress, Failed, ...),
	// as of the last health check; empty until the bundle was applied.
	// +optional
	Status string `json:"status,omitempty"`
	// Message says why the object is not Current.
	// +optional
	Message string `json:"message,omitempty"`
}

// VMRolloutPhase is where the VM rollout of a VidraResource stands.
// +kubebuilder:validation:Enum=Idle;Progressing;Paused;Completed
type VMRolloutPhase string

// VM rollout phases.
const (
	VMRolloutIdle        VMRolloutPhase = "Idle"
	VMRolloutProgressing VMRolloutPhase = "Progressing"
	VMRolloutPaused      VMRolloutPhase = "Paused"
	VMRolloutCompleted   VMRolloutPhase = "Completed"
)

// VMRolloutStatus counts the VirtualMachines of a VidraResource by rollout state.
type VMRolloutStatus struct {
	// Phase of the rollout.
	// +optional
	Phase VMRolloutPhase `json:"phase,omitempty"`
	// Total VMs owned by the VidraResource.
	// +optional
	Total int32 `json:"total,omitempty"`
	// Updated VMs run their current spec.
	// +optional
	Updated int32 `json:"updated,omitempty"`
	// Pending VMs need a restart that has not started.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// Unavailable VMs are being restarted or not Ready.
	// +optional
	Unavailable int32 `json:"unavailable,omitempty"`
	// Failed VMs did not come back Ready within readyTimeout.
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// VidraResourceStatus is what Vidra observed of a VidraResource on its cluster.
type VidraResourceStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling and Stalled, with kstatus semantics.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DeployState is the original Vidra's coarse state (its capitalised JSON name is kept).
	// +optional
	DeployState State `json:"DeployState,omitempty"`

	// LastError is the last error met, empty once a reconcile succeeds.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// LastSyncTime is when a successful reconcile last changed the cluster to match the
	// manifest (objects created, configured, repaired or pruned). A resync that finds
	// everything as declared leaves it, and writes nothing.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// ManagedResources lists the objects this VidraResource owns on its cluster. An
	// object is recorded before it is applied, here or in the revision of the content
	// that applies it, so no object is ever left untracked.
	// +optional
	ManagedResources []ManagedResource `json:"managedResources,omitempty"`

	// ResourceCount is the number of managedResources, for kubectl's RESOURCES column.
	// +optional
	ResourceCount int32 `json:"resourceCount,omitempty"`

	// Cluster is the name of the enrolled cluster the destination resolved to.
	// +optional
	Cluster string `json:"cluster,omitempty"`

	// VMRollout reports the restart progress of the bundle's VirtualMachines.
	// +optional
	VMRollout *VMRolloutStatus `json:"vmRollout,omitempty"`

	// AppliedAt is when the current spec was first applied: spec.timeout counts from it.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`

	// Revision is the number of the revision (ControllerRevision) applied now.
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// Preview is what delivering spec.preview (or, with spec.dryRun, the bundle) would do.
	// +optional
	Preview *PreviewStatus `json:"preview,omitempty"`
}

// VidraResource applies one manifest bundle to one cluster and keeps it there.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vr,categories=vidra
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.cluster`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.DeployState`
// +kubebuilder:printcolumn:name="Resources",type=integer,JSONPath=`.status.resourceCount`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`,priority=1
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VidraResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VidraResourceSpec   `json:"spec,omitempty"`
	Status VidraResourceStatus `json:"status,omitempty"`
}

// VidraResourceList is a list of VidraResources.
// +kubebuilder:object:root=true
type VidraResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VidraResource `json:"items"`
}
