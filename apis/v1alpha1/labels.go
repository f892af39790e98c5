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
	// ArtifactIDAnnotation is the Infrahub ID of the artifact a VidraResource delivers.
	ArtifactIDAnnotation = "vidra.infrahub.operators.com/artifact-id"
	// ArtifactChecksumAnnotation is the MD5 checksum of the artifact content in the
	// VidraResource's manifest.
	ArtifactChecksumAnnotation = "vidra.infrahub.operators.com/artifact-checksum"
	// ArtifactNameAnnotation and ArtifactTargetAnnotation say which artifact it is, for
	// people reading the VidraResource.
	ArtifactNameAnnotation   = "vidra.infrahub.operators.com/artifact-name"
	ArtifactTargetAnnotation = "vidra.infrahub.operators.com/artifact-target"

	// RequestedAtAnnotation on an InfrahubSync asks for a sync now whenever its value
	// changes (any value; a time is customary). Infrahub's webhooks set it, and so can
	// a person: kubectl annotate ihs NAME vidra.infrahub.operators.com/requested-at="$(date)" --overwrite.
	RequestedAtAnnotation = "vidra.infrahub.operators.com/requested-at"

	// InfrahubURLLabel on a Secret in the operator's namespace offers username and
	// password for the Infrahub whose host is the label's value (the original Vidra's
	// convention).
	InfrahubURLLabel = "infrahub-api-url"
)

// Condition types of a VidraCluster beside Ready.
const (
	// ConditionKubeconfigCurrent is True when the engaged kubeconfig is the one the Secret
	// holds now, False while a changed kubeconfig could not replace it.
	ConditionKubeconfigCurrent = "KubeconfigCurrent"
)
