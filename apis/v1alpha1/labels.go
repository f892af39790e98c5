package v1alpha1

// Labels and keys that are part of Vidra's contract with its users.
const (
	// ClusterLabel on a Secret in the operator's namespace enrolls the cluster whose
	// kubeconfig the Secret holds; its value is the cluster's name (a DNS-1123 label).
	ClusterLabel = "vidra.infrahub.operators.com/cluster"

	// LegacyClusterLabel is the original Vidra's enrollment label; its value is the
	// cluster's host, from which the cluster's name is derived.
	LegacyClusterLabel = "cluster-kubeconfig"

	// KubeconfigKey is the data key of an enrollment Secret that holds the kubeconfig.
	KubeconfigKey = "kubeconfig"

	// OwnersAnnotation on every object Vidra applies holds the set of its owners: a
	// sorted JSON array of owner IDs ("<hub-id>/<VidraResource name>"), never duplicated.
	OwnersAnnotation = "vidra.infrahub.operators.com/owners"

	// ManagedByLabel and ManagedByValue mark every object Vidra applies; member caches
	// hold only objects with it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "vidra"
)

// Labels and annotations on the VidraResources an InfrahubSync makes.
const (
	// InfrahubSyncLabel names the InfrahubSync that made a VidraResource.
	InfrahubSyncLabel = "vidra.infrahub.operators.com/infrahubsync"
	// BundleIDAnnotation names the bundle a VidraResource delivers across revisions (an
	// artifact's Infrahub ID, a sync's kind with its cluster).
	BundleIDAnnotation = "vidra.infrahub.operators.com/bundle-id"
	// BundleChecksumAnnotation is the checksum of the bundle's content in the
	// VidraResource's manifest (MD5, as Infrahub reports it for an artifact).
	BundleChecksumAnnotation = "vidra.infrahub.operators.com/bundle-checksum"
	// BundleNameAnnotation, BundleTargetAnnotation and BundleRevisionAnnotation say which
	// bundle it is, for people: its name, the node it was rendered for (an artifact's
	// target), and the source revision it came from (a Git commit, an OCI tag and
	// digest, a chart version).
	BundleNameAnnotation     = "vidra.infrahub.operators.com/bundle-name"
	BundleTargetAnnotation   = "vidra.infrahub.operators.com/bundle-target"
	BundleRevisionAnnotation = "vidra.infrahub.operators.com/bundle-revision"
	// BundleVariablesAnnotation is, for people, the variables a sync's spec.postBuild
	// built the bundle with: a JSON object of each variable's name and value, the
	// cluster's as cluster.name and cluster.labels.KEY; a Secret's value is never shown,
	// only "<Secret NAME>".
	BundleVariablesAnnotation = "vidra.infrahub.operators.com/bundle-variables"

	// RequestedAtAnnotation on an InfrahubSync asks for a sync now whenever its value
	// changes (any value; a time is customary). Infrahub's webhooks set it, and so can
	// a person: kubectl annotate ihs NAME vidra.infrahub.operators.com/requested-at="$(date)" --overwrite.
	RequestedAtAnnotation = "vidra.infrahub.operators.com/requested-at"

	// SyncRevisionAnnotation on a VidraResource is the revision of its InfrahubSync's
	// content that it delivers.
	SyncRevisionAnnotation = "vidra.infrahub.operators.com/sync-revision"
	// RolloutUpdatedAtAnnotation on a VidraResource is when a progressive rollout moved
	// it to the revision it delivers: its health timeout counts from then.
	RolloutUpdatedAtAnnotation = "vidra.infrahub.operators.com/rollout-updated-at"
	// PinnedRevisionAnnotation on a VidraResource says a person rolled it back to that
	// revision: its InfrahubSync leaves its content alone until the rollout is resumed.
	PinnedRevisionAnnotation = "vidra.infrahub.operators.com/pinned-revision"
	// ResumeRequestedAtAnnotation on an InfrahubSync resumes its rollout whenever its
	// value changes: failed clusters get another healthTimeout, pinned VidraResources
	// follow the sync again (kubectl vidra rollout resume sets it).
	ResumeRequestedAtAnnotation = "vidra.infrahub.operators.com/resume-requested-at"

	// ApplyPhaseAnnotation on an object of a bundle places it in an apply stage of its
	// own: "pre" objects are applied after CRDs and Namespaces and before the others,
	// "post" objects after the others. A HelmSync sets it from a chart's hooks.
	ApplyPhaseAnnotation = "vidra.infrahub.operators.com/apply-phase"

	// PruneAnnotation set to PruneDisabled on an object of a bundle keeps it on its cluster
	// when its last owner lets go of it: it is left there unmanaged, never deleted. A
	// HelmSync sets it on a chart's CRDs and on objects the chart marks
	// helm.sh/resource-policy: keep, which Helm never deletes either.
	PruneAnnotation = "vidra.infrahub.operators.com/prune"

	// InfrahubURLLabel on a Secret in the operator's namespace offers username and
	// password for the Infrahub whose host is the label's value (the original Vidra's
	// convention).
	InfrahubURLLabel = "infrahub-api-url"
)

// Labels and annotations of the ControllerRevisions that keep a VidraResource's history.
const (
	// RevisionOfLabel is the UID of the VidraResource a ControllerRevision belongs to.
	RevisionOfLabel = "vidra.infrahub.operators.com/vidraresource-uid"
	// RevisionSourceAnnotation says where the revision's content came from: an
	// InfrahubSync's artifact and checksum, or a person.
	RevisionSourceAnnotation = "vidra.infrahub.operators.com/source"
	// RevisionDigestAnnotation is the sha256 digest of the revision's manifest.
	RevisionDigestAnnotation = "vidra.infrahub.operators.com/digest"
	// RevisionResultAnnotation is how the revision ended when a newer one replaced it.
	RevisionResultAnnotation = "vidra.infrahub.operators.com/result"
)

// Annotations of an enrollment Secret that make up the cluster's delivery policy. They
// live on the Secret, in the operator's namespace, where hub users who write
// VidraResources cannot change them.
const (
	// AllowedNamespacesAnnotation: comma-separated namespaces; namespaced objects in any
	// other are refused.
	AllowedNamespacesAnnotation = "vidra.infrahub.operators.com/allowed-namespaces"
	// AllowedClusterKindsAnnotation: comma-separated Kind.group (Namespace for the core
	// group) of the cluster-scoped kinds allowed; with allowed-namespaces set, any other
	// cluster-scoped kind is refused.
	AllowedClusterKindsAnnotation = "vidra.infrahub.operators.com/allowed-cluster-kinds"
	// RequireServiceAccountAnnotation: "true" refuses VidraResources without
	// spec.serviceAccountName.
	RequireServiceAccountAnnotation = "vidra.infrahub.operators.com/require-service-account"
)

// Who last wrote a VidraResource's spec, as the chart's admission policy records it from
// the request (a value a person writes is overwritten): the operator checks with a
// SubjectAccessReview that they may deliver to a cluster only a server URL names.
const (
	// RequestedByAnnotation is the user name.
	RequestedByAnnotation = "vidra.infrahub.operators.com/requested-by"
	// RequestedByGroupsAnnotation is the user's groups, comma-separated.
	RequestedByGroupsAnnotation = "vidra.infrahub.operators.com/requested-by-groups"
	// RequestedByUIDAnnotation is the user's UID (a ServiceAccount's, say), when it has one.
	RequestedByUIDAnnotation = "vidra.infrahub.operators.com/requested-by-uid"
	// RequestedByExtraAnnotation is the user's extra attributes (a token's credential ID,
	// the node a token is bound to), as key=value,value entries joined by ";" in key order.
	RequestedByExtraAnnotation = "vidra.infrahub.operators.com/requested-by-extra"
)

// RequesterAnnotations are the annotations that record who asked: written by the API
// server alone, never by a template or a person.
func RequesterAnnotations() []string {
	return []string{RequestedByAnnotation, RequestedByGroupsAnnotation, RequestedByUIDAnnotation, RequestedByExtraAnnotation}
}

// AllowedURLsAnnotation on a Secret in the operator's namespace lists the URL prefixes
// (comma- or space-separated) its credentials or CA may be sent to; a sync names it only
// for a URL under one of them, and a Secret without it is never sent anywhere.
const AllowedURLsAnnotation = "vidra.infrahub.operators.com/allowed-urls"

// UseVerb is the RBAC verb, on a Secret in the operator's namespace, that lets a person
// have a sync of theirs use it (send it to a source, or verify a source with it).
const UseVerb = "use"

// DeliverVerb is the RBAC verb, on vidraclusters named for a cluster, that lets a person
// deliver there; the hub itself is the name LocalClusterName.
const DeliverVerb = "deliver"

// LocalClusterName names the hub in VidraResource status and in deliver rights.
const LocalClusterName = "local"

// ServiceAccountAnnotation on an enrollment Secret names the member's ServiceAccount
// (NAMESPACE/NAME) whose token the kubeconfig holds: kubectl vidra enroll created it, and
// the operator renews the token through the member's TokenRequest API.
const ServiceAccountAnnotation = "vidra.infrahub.operators.com/service-account"

// An enrollment Secret the operator wrote for a cluster of an inventory (Cluster API) is
// labeled InventoryLabel=<inventory> and names its inventory object in
// InventorySourceAnnotation (NAMESPACE/NAME); it is removed when that object goes. While
// the cluster cannot be enrolled yet, InventoryWaitingAnnotation says why (the cluster is
// shown Pending, reason Provisioning); while the inventory says its control plane is not
// healthy, InventoryUnhealthyAnnotation does (Pending, reason ControlPlaneUnhealthy);
// when its credentials were refused, InventoryRefusedAnnotation does (Rejected, reason
// InventoryRefused).
const (
	InventoryLabel               = "vidra.infrahub.operators.com/inventory"
	InventorySourceAnnotation    = "vidra.infrahub.operators.com/inventory-source"
	InventoryWaitingAnnotation   = "vidra.infrahub.operators.com/inventory-waiting"
	InventoryUnhealthyAnnotation = "vidra.infrahub.operators.com/inventory-unhealthy"
	InventoryRefusedAnnotation   = "vidra.infrahub.operators.com/inventory-refused"
	// InventoryCredentialsAnnotation is a digest of the inventory's credentials the
	// identity was created with: when they change (a new control plane), it is again.
	InventoryCredentialsAnnotation = "vidra.infrahub.operators.com/inventory-credentials"
)

// IdentityNamespacesAnnotation on an inventory object (a Cluster API Cluster, a
// ClusterProfile) narrows the identity the operator creates on its cluster to these
// namespaces (comma-separated), as kubectl vidra enroll --namespaces does; without it the
// identity may manage any object.
const IdentityNamespacesAnnotation = "vidra.infrahub.operators.com/namespaces"

// PruneDisabled is the value of PruneAnnotation that keeps an object.
const PruneDisabled = "disabled"

// Apply phases, the values of ApplyPhaseAnnotation.
const (
	ApplyPhasePre  = "pre"
	ApplyPhasePost = "post"
)

// Pull mode: a cluster whose agent fetches its bundles from the hub.
const (
	// ModeAnnotation set to ModePull on an enrollment Secret enrolls a pull cluster: the
	// Secret holds no credential, only the cluster's name, labels and delivery policy.
	ModeAnnotation = "vidra.infrahub.operators.com/mode"
	// ModePull is the value of ModeAnnotation for a pull cluster.
	ModePull = "pull"

	// AgentSecretName is the Secret, in the agent's namespace on its member, that holds
	// the agent's way to the hub: AgentSecretKubeconfigKey (the hub's address, CA and the
	// agent's token) and AgentSecretClusterKey (the cluster's name on the hub).
	AgentSecretName          = "vidra-agent-hub"
	AgentSecretKubeconfigKey = "kubeconfig"
	AgentSecretClusterKey    = "cluster"

	// PulledFromLabel marks a VidraResource on a member that is the agent's copy of a
	// bundle of the hub; its value is the cluster's name on the hub.
	PulledFromLabel = "vidra.infrahub.operators.com/pulled-from"
	// HubGenerationAnnotation on a VidraBundle, and on the agent's copy of it, is the
	// generation of the hub's VidraResource it carries.
	HubGenerationAnnotation = "vidra.infrahub.operators.com/hub-generation"
	// AgentReleaseFinalizer on a VidraBundle holds it until its agent reports that it
	// released the bundle's objects on its member.
	AgentReleaseFinalizer = "vidra.infrahub.operators.com/agent-release"
	// WithdrawAnnotation set to WithdrawHandOver on a VidraBundle being deleted tells the
	// agent to drop its copy without releasing what it delivered: the cluster is now
	// delivered to in push mode, in the same owners' names.
	WithdrawAnnotation = "vidra.infrahub.operators.com/withdraw"
	WithdrawHandOver   = "hand-over"
)
