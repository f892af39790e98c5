package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutStrategy says how a new revision of an InfrahubSync's content reaches its
// clusters.
// +kubebuilder:validation:Enum=AllAtOnce;Progressive
type RolloutStrategy string

// Rollout strategies.
const (
	// RolloutAllAtOnce delivers a new revision to every cluster at once.
	RolloutAllAtOnce RolloutStrategy = "AllAtOnce"
	// RolloutProgressive delivers it wave by wave, each gated by the health of the last.
	RolloutProgressive RolloutStrategy = "Progressive"
)

// RolloutFailurePolicy says what happens when an updated cluster does not become healthy.
// +kubebuilder:validation:Enum=Pause;Rollback
type RolloutFailurePolicy string

// Rollout failure policies.
const (
	// RolloutFailurePause updates nothing more until the content changes or a person
	// resumes the rollout.
	RolloutFailurePause RolloutFailurePolicy = "Pause"
	// RolloutFailureRollback returns the failed clusters to the previous revision.
	RolloutFailureRollback RolloutFailurePolicy = "Rollback"
)

// RolloutWave is a group of clusters that receives a revision together.
type RolloutWave struct {
	// Name of the wave, shown in status and Events.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// ClusterSelector picks the wave's clusters by their VidraCluster labels. A cluster
	// belongs to the first wave whose selector matches it; clusters no wave matches form
	// a last, implicit wave named "remaining".
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector"`

	// PauseAfter is how long to wait, once every cluster of the wave is healthy, before
	// the next wave starts.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="pauseAfter must be a duration such as 5m or 1h"
	PauseAfter *metav1.Duration `json:"pauseAfter,omitempty"`
}

// RolloutSpec says how a new revision of an InfrahubSync's content moves across its
// clusters.
type RolloutSpec struct {
	// Strategy is AllAtOnce (the default: every cluster at once) or Progressive (wave by
	// wave, each gated by health).
	// +optional
	// +kubebuilder:default=AllAtOnce
	Strategy RolloutStrategy `json:"strategy,omitempty"`

	// Waves, in order. A cluster belongs to the first wave whose selector matches it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(w, w.name != 'remaining')",message="the wave name remaining is the implicit last wave's: choose another"
	Waves []RolloutWave `json:"waves,omitempty"`

	// MaxUnavailable is how many clusters of a wave may be updating or unhealthy at once:
	// a number (at least 1) or a percentage of the wave's clusters (rounded down, at
	// least one cluster).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="maxUnavailable must be an integer of at least 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// HealthTimeout is how long an updated cluster has to become healthy (its
	// VidraResources Ready for the new revision, their VM rollouts Completed) before the
	// rollout fails.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="healthTimeout must be a positive duration such as 10m"
	HealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`

	// OnFailure is Pause (the default: nothing more is updated until the content changes
	// or a person resumes) or Rollback (the failed clusters return to the previous
	// revision).
	// +optional
	// +kubebuilder:default=Pause
	OnFailure RolloutFailurePolicy `json:"onFailure,omitempty"`

	// Paused stops the rollout where it is: no more cluster is updated until it is false.
	// Clusters keep (and repair) the revision they have.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// RolloutPhase is where the rollout of a revision stands.
// +kubebuilder:validation:Enum=Progressing;Paused;Completed;Failed;RolledBack
type RolloutPhase string

// Rollout phases.
const (
	RolloutProgressing RolloutPhase = "Progressing"
	RolloutPaused      RolloutPhase = "Paused"
	RolloutCompleted   RolloutPhase = "Completed"
	RolloutFailed      RolloutPhase = "Failed"
	RolloutRolledBack  RolloutPhase = "RolledBack"
)

// RolloutStatus is where the newest revision of an InfrahubSync's content stands. It
// holds everything a restarted operator needs to continue.
type RolloutStatus struct {
	// Revision counts the revisions of the sync's content: it grows by one whenever an
	// artifact's checksum changes, or an artifact comes or goes.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// ContentHash identifies the revision: a hash of its artifacts and their checksums.
	// +optional
	ContentHash string `json:"contentHash,omitempty"`
	// StableRevision is the last revision whose rollout completed: what joining clusters
	// get, and where a rollback returns.
	// +optional
	StableRevision int64 `json:"stableRevision,omitempty"`
	// Phase of the rollout.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// Wave is the wave being updated (or the last one, once Completed).
	// +optional
	Wave string `json:"wave,omitempty"`
	// Updated clusters hold the revision and are healthy.
	// +optional
	Updated int32 `json:"updated,omitempty"`
	// Total is the number of clusters the sync delivers to.
	// +optional
	Total int32 `json:"total,omitempty"`
	// FailedClusters did not become healthy within healthTimeout.
	// +optional
	FailedClusters []string `json:"failedClusters,omitempty"`
	// Message says what the rollout waits for.
	// +optional
	Message string `json:"message,omitempty"`
	// StartedAt is when this revision's rollout started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// WaveCompletedAt is when every cluster of the current wave became healthy, for
	// pauseAfter.
	// +optional
	WaveCompletedAt *metav1.Time `json:"waveCompletedAt,omitempty"`
	// Resumed is the value of the resume-requested-at annotation last acted on.
	// +optional
	Resumed string `json:"resumed,omitempty"`
	// ResumedAt is when a person last resumed the rollout: health timeouts count from it.
	// +optional
	ResumedAt *metav1.Time `json:"resumedAt,omitempty"`
}
