package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// State is the coarse lifecycle state the original Vidra API reports in
// InfrahubSync.status.syncState and VidraResource.status.DeployState. Conditions carry the
// detail; State stays for users and scripts that read the original field.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Stale
type State string

// States of a sync or a deployment.
const (
	StatePending   State = "Pending"
	StateRunning   State = "Running"
	StateSucceeded State = "Succeeded"
	StateFailed    State = "Failed"
	StateStale     State = "Stale"
)

// LocalClusterServer is the server URL that, as in the original Vidra, names the cluster
// the operator runs in.
const LocalClusterServer = "https://kubernetes.default.svc"

// Destination says which cluster a VidraResource's objects go to and how they are placed.
// Neither cluster nor server (or server https://kubernetes.default.svc) means the local
// cluster.
// +kubebuilder:validation:XValidation:rule="!(has(self.cluster) && has(self.server))",message="cluster and server are mutually exclusive: name an enrolled cluster or give its server URL, not both",fieldPath=".cluster"
type Destination struct {
	// Server is the API server URL of the destination cluster, matched against the servers
	// of enrolled clusters. Kept from the original Vidra API.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="server must be an http or https URL with a host, such as https://10.0.0.1:6443"
	Server string `json:"server,omitempty"`

	// Cluster is the name of an enrolled cluster (a VidraCluster): a DNS label, or labels
	// joined by dots (an inventory's clusters are <namespace>.<name>).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Cluster string `json:"cluster,omitempty"`

	// Namespace is given to namespaced objects of the manifest that name none.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// ReconcileOnEvents, when true, repairs changes to the applied objects as soon as the
	// destination reports them instead of at the next periodic reconcile.
	// +optional
	ReconcileOnEvents bool `json:"reconcileOnEvents,omitempty"`
}

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// VidraResourceFinalizer holds a deleted VidraResource until its objects are released.
const VidraResourceFinalizer = "vidraresource.infrahub.operators.com/finalizer"

// StatusConditions gives the VidraResource's conditions to shared condition helpers.
func (in *VidraResource) StatusConditions() *[]metav1.Condition { return &in.Status.Conditions }

// StatusConditions gives the InfrahubSync's conditions to shared condition helpers.
func (in *InfrahubSync) StatusConditions() *[]metav1.Condition { return &in.Status.Conditions }
