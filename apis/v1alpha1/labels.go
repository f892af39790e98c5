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

// Condition types of a VidraCluster beside Ready.
const (
	// ConditionKubeconfigCurrent is True when the engaged kubeconfig is the one the Secret
	// holds now, False while a changed kubeconfig could not replace it.
	ConditionKubeconfigCurrent = "KubeconfigCurrent"
)
