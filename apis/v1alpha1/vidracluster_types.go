package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPhase is where an enrolled cluster stands.
// +kubebuilder:validation:Enum=Pending;Engaged;Unreachable;Rejected
type ClusterPhase string

// Cluster phases.
const (
	// ClusterPending: the Secret was seen and the cluster is being engaged.
	ClusterPending ClusterPhase = "Pending"
	// ClusterEngaged: the cluster is reachable and its controllers run.
	ClusterEngaged ClusterPhase = "Engaged"
	// ClusterUnreachable: the cluster was engaged but its API server stopped answering.
	ClusterUnreachable ClusterPhase = "Unreachable"
	// ClusterRejected: the kubeconfig broke policy or could not be used; see message.
	ClusterRejected ClusterPhase = "Rejected"
)

// VidraClusterStatus is what the cluster provider observed of an enrolled cluster.
type VidraClusterStatus struct {
	// Phase of the cluster.
	// +optional
	Phase ClusterPhase `json:"phase,omitempty"`

	// Server is the API server URL from the cluster's kubeconfig.
	// +optional
	Server string `json:"server,omitempty"`

	// KubernetesVersion the cluster's API server reported at the last probe.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// LastProbeTime is when a probe of the API server last changed what this status
	// shows (the cluster was engaged, became unreachable or reachable again, changed its
	// version). Probes that find the cluster as it was write nothing, so an idle fleet
	// costs the hub no writes; the metric vidra_cluster_last_probe_timestamp_seconds says
	// when each cluster was last probed.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`

	// Message explains the phase, such as why a kubeconfig was rejected. It never holds
	// credentials.
	// +optional
	Message string `json:"message,omitempty"`

	// Conditions: Ready, with the reason of the last change.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// SecretRef is the kubeconfig Secret that enrolled the cluster.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`

	// DeliveryPolicy is what the enrollment Secret lets the hub deliver to the cluster;
	// absent when it allows everything.
	// +optional
	DeliveryPolicy *DeliveryPolicy `json:"deliveryPolicy,omitempty"`

	// Identity is how the hub authenticates to the cluster; for a pull cluster, how its
	// agent authenticates to the hub.
	// +optional
	Identity *ClusterIdentity `json:"identity,omitempty"`

	// Mode is Push (the hub applies, with a credential for the cluster) or Pull (the
	// cluster's agent fetches its bundles from the hub, which holds no credential for it).
	// +optional
	Mode ClusterMode `json:"mode,omitempty"`

	// Agent is what the agent of a pull cluster last reported.
	// +optional
	Agent *AgentStatus `json:"agent,omitempty"`
}

// ClusterMode is how a cluster receives its bundles.
// +kubebuilder:validation:Enum=Push;Pull
type ClusterMode string

// Cluster modes.
const (
	// ClusterModePush: the hub connects to the cluster and applies.
	ClusterModePush ClusterMode = "Push"
	// ClusterModePull: an agent on the cluster fetches from the hub and applies.
	ClusterModePull ClusterMode = "Pull"
)

// AgentStatus is what the agent of a pull cluster reports in its heartbeat.
type AgentStatus struct {
	// Version of the agent's binary.
	// +optional
	Version string `json:"version,omitempty"`
	// LastHeartbeat is when the agent last reported.
	// +optional
	LastHeartbeat *metav1.Time `json:"lastHeartbeat,omitempty"`
	// Namespace is the cluster's namespace on the hub, which holds its bundles and which
	// is all its agent may read.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Message says what is wrong with the agent: another version than the hub's, or a
	// token the hub refuses.
	// +optional
	Message string `json:"message,omitempty"`
}

// Types of identity the hub uses on a cluster.
const (
	// IdentityServiceAccount: the kubeconfig holds a token of the ServiceAccount that
	// kubectl vidra enroll created, which the operator renews before it expires.
	IdentityServiceAccount = "ServiceAccount"
	// IdentityKubeconfig: the kubeconfig holds credentials supplied as they are.
	IdentityKubeconfig = "Kubeconfig"
)

// ClusterIdentity is the identity the hub uses on a cluster, and how long it lasts.
type ClusterIdentity struct {
	// Type is ServiceAccount or Kubeconfig.
	// +kubebuilder:validation:Enum=ServiceAccount;Kubeconfig
	Type string `json:"type"`
	// ServiceAccount is the cluster's ServiceAccount (NAMESPACE/NAME) whose token is used.
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// ExpiresAt is when the current token expires.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// RenewAt is when the operator renews it.
	// +optional
	RenewAt *metav1.Time `json:"renewAt,omitempty"`
	// Message says why the token cannot be renewed, and the time left.
	// +optional
	Message string `json:"message,omitempty"`
}

// DeliveryPolicy is a cluster's delivery policy, as its enrollment Secret's annotations
// set it.
type DeliveryPolicy struct {
	// AllowedNamespaces, when set, are the only namespaces objects may be delivered to.
	// +optional
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
	// AllowedClusterKinds, when set, are the only cluster-scoped kinds (Kind.group).
	// +optional
	AllowedClusterKinds []string `json:"allowedClusterKinds,omitempty"`
	// RequireServiceAccount refuses VidraResources without spec.serviceAccountName.
	// +optional
	RequireServiceAccount bool `json:"requireServiceAccount,omitempty"`
	// Error says why the annotations do not parse: then nothing is delivered.
	// +optional
	Error string `json:"error,omitempty"`
}

// VidraCluster shows one cluster enrolled by a labeled kubeconfig Secret. The cluster
// provider writes it; users read it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vc,categories=vidra
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.server`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name="Inventory",type=string,JSONPath=`.metadata.labels.vidra\.infrahub\.operators\.com/inventory`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.status.identity.type`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.status.identity.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.agent.lastHeartbeat`,priority=1
type VidraCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status VidraClusterStatus `json:"status,omitempty"`
}

// VidraClusterList is a list of VidraClusters.
// +kubebuilder:object:root=true
type VidraClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VidraCluster `json:"items"`
}
