package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Labels naming the GitSync, OCISync or HelmSync that made a VidraResource, as InfrahubSyncLabel
// names an InfrahubSync.
const (
	GitSyncLabel  = "vidra.infrahub.operators.com/gitsync"
	OCISyncLabel  = "vidra.infrahub.operators.com/ocisync"
	HelmSyncLabel = "vidra.infrahub.operators.com/helmsync"
)

// SyncKind describes one kind of sync for the tools that show or drive any of them.
// +kubebuilder:object:generate=false
type SyncKind struct {
	// Kind, Resource (plural) and Short (its short name) as the API serves them.
	Kind, Resource, Short string
	// Label names a sync of this kind on the VidraResources it makes.
	Label string
	// New returns an empty object of the kind; NewList an empty list.
	New     func() Sync
	NewList func() SyncList
}

// SyncKinds are the kinds of sync, in the order tools list them.
func SyncKinds() []SyncKind {
	return []SyncKind{
		{Kind: "InfrahubSync", Resource: "infrahubsyncs", Short: "ihs", Label: InfrahubSyncLabel,
			New: func() Sync { return &InfrahubSync{} }, NewList: func() SyncList { return &InfrahubSyncList{} }},
		{Kind: "GitSync", Resource: "gitsyncs", Short: "gs", Label: GitSyncLabel,
			New: func() Sync { return &GitSync{} }, NewList: func() SyncList { return &GitSyncList{} }},
		{Kind: "OCISync", Resource: "ocisyncs", Short: "ocis", Label: OCISyncLabel,
			New: func() Sync { return &OCISync{} }, NewList: func() SyncList { return &OCISyncList{} }},
		{Kind: "HelmSync", Resource: "helmsyncs", Short: "hs", Label: HelmSyncLabel,
			New: func() Sync { return &HelmSync{} }, NewList: func() SyncList { return &HelmSyncList{} }},
	}
}

// SyncOf returns the kind and name of the sync that made a VidraResource with these
// labels ("" when none did).
func SyncOf(labels map[string]string) (SyncKind, string) {
	for _, k := range SyncKinds() {
		if name := labels[k.Label]; name != "" {
			return k, name
		}
	}
	return SyncKind{}, ""
}

// Sync is what every kind of sync shows: its rollout, the bundles it delivers and its
// conditions.
// +kubebuilder:object:generate=false
type Sync interface {
	metav1.Object
	runtime.Object
	// SyncKind describes its kind.
	SyncKind() SyncKind
	// RolloutSpec is its spec.rollout.
	RolloutSpec() *RolloutSpec
	// RolloutStatus is its status.rollout.
	RolloutStatus() *RolloutStatus
	// Bundles are the bundles it delivers (an InfrahubSync's artifacts).
	Bundles() []BundleStatus
	// StatusConditions are its conditions.
	StatusConditions() *[]metav1.Condition
	// Suspended says whether spec.suspend holds it.
	Suspended() bool
	// Waits says whether its Ready waits for its bundles to be in effect (spec.wait).
	Waits() bool
	// Dependencies are the syncs it waits for (spec.dependsOn), each with its kind.
	Dependencies() []SyncReference
	// HealthChecks are its spec.healthCheckExprs and spec.timeout.
	HealthChecks() ([]HealthCheck, *metav1.Duration)
	// SetClusters sets status.clusters; Clusters reads it.
	SetClusters(counts *ClusterCounts)
	Clusters() *ClusterCounts
	// SelectsClusters says whether it fans out by clusterSelector, so that clusters
	// joining or leaving the selection concern it.
	SelectsClusters() bool
	// SourceURL is the URL it reads from; LastSynced, when it last read it successfully.
	SourceURL() string
	LastSynced() *metav1.Time
	// Fetched is the revision of its source it fetched last (status.source), nil for a
	// kind that reads no single revision (InfrahubSync) or before the first fetch.
	Fetched() *SourceStatus
}

// SyncList is a list of syncs of one kind.
// +kubebuilder:object:generate=false
type SyncList interface {
	runtime.Object
	metav1.ListInterface
	// Syncs are its items.
	Syncs() []Sync
}

// Ref names a sync of the kind as kubectl vidra's commands take it and show it: "gs/web".
func (k SyncKind) Ref(name string) string { return k.Short + "/" + name }

// ResumeArgument names a sync to kubectl vidra rollout resume: a bare name is looked up
// in SyncKinds order, so the first kind (InfrahubSync) needs no prefix; the others do.
func (k SyncKind) ResumeArgument(name string) string {
	if k.Kind == SyncKinds()[0].Kind {
		return name
	}
	return k.Ref(name)
}

// LookupSyncKind describes the sync kind named kind (empty when there is none).
func LookupSyncKind(kind string) SyncKind {
	for _, k := range SyncKinds() {
		if k.Kind == kind {
			return k
		}
	}
	return SyncKind{}
}

// SyncKind describes the InfrahubSync kind.
func (in *InfrahubSync) SyncKind() SyncKind { return LookupSyncKind("InfrahubSync") }

// RolloutSpec is the InfrahubSync's spec.rollout.
func (in *InfrahubSync) RolloutSpec() *RolloutSpec { return in.Spec.Rollout }

// RolloutStatus is the InfrahubSync's status.rollout.
func (in *InfrahubSync) RolloutStatus() *RolloutStatus { return in.Status.Rollout }

// Bundles are the InfrahubSync's artifacts.
func (in *InfrahubSync) Bundles() []BundleStatus { return in.Status.Artifacts }

// Waits says whether the InfrahubSync's Ready waits for its bundles to be in effect.
func (in *InfrahubSync) Waits() bool { return in.Spec.Wait == nil || *in.Spec.Wait }

// Dependencies are the InfrahubSync's spec.dependsOn, each with its kind.
func (in *InfrahubSync) Dependencies() []SyncReference {
	return withKinds(in.Spec.DependsOn, "InfrahubSync")
}

// HealthChecks are the InfrahubSync's spec.healthCheckExprs and spec.timeout.
func (in *InfrahubSync) HealthChecks() ([]HealthCheck, *metav1.Duration) {
	return in.Spec.HealthCheckExprs, in.Spec.Timeout
}

// SetClusters sets the InfrahubSync's status.clusters.
func (in *InfrahubSync) SetClusters(counts *ClusterCounts) { in.Status.Clusters = counts }

// Clusters is the InfrahubSync's status.clusters.
func (in *InfrahubSync) Clusters() *ClusterCounts { return in.Status.Clusters }

// Suspended says whether spec.suspend holds the InfrahubSync.
func (in *InfrahubSync) Suspended() bool { return in.Spec.Suspend }

// SelectsClusters says whether the InfrahubSync fans out by clusterSelector.
func (in *InfrahubSync) SelectsClusters() bool { return in.Spec.Destination.ClusterSelector != nil }

// SourceURL is the InfrahubSync's Infrahub.
func (in *InfrahubSync) SourceURL() string { return in.Spec.Source.InfrahubAPIURL }

// LastSynced is when the InfrahubSync last listed its artifacts.
func (in *InfrahubSync) LastSynced() *metav1.Time { return in.Status.LastSyncTime }

// Fetched is nil: an InfrahubSync reads artifacts, not one revision.
func (in *InfrahubSync) Fetched() *SourceStatus { return nil }

// Syncs are the list's items.
func (in *InfrahubSyncList) Syncs() []Sync {
	out := make([]Sync, len(in.Items))
	for i := range in.Items {
		out[i] = &in.Items[i]
	}
	return out
}

// SyncKind describes the GitSync kind.
func (in *GitSync) SyncKind() SyncKind { return LookupSyncKind("GitSync") }

// RolloutSpec is the GitSync's spec.rollout.
func (in *GitSync) RolloutSpec() *RolloutSpec { return in.Spec.Rollout }

// RolloutStatus is the GitSync's status.rollout.
func (in *GitSync) RolloutStatus() *RolloutStatus { return in.Status.Rollout }

// Bundles are the GitSync's bundles.
func (in *GitSync) Bundles() []BundleStatus { return in.Status.Bundles }

// StatusConditions gives the GitSync's conditions to shared condition helpers.
func (in *GitSync) StatusConditions() *[]metav1.Condition { return &in.Status.Conditions }

// Options are the GitSync's spec beside its source.
func (in *GitSync) Options() *SyncOptions { return &in.Spec.SyncOptions }

// SourceStatus is the GitSync's status.
func (in *GitSync) SourceStatus() *SourceSyncStatus { return &in.Status }

// Waits says whether the GitSync's Ready waits for its bundles to be in effect.
func (in *GitSync) Waits() bool { return in.Spec.Wait == nil || *in.Spec.Wait }

// Dependencies are the GitSync's spec.dependsOn, each with its kind.
func (in *GitSync) Dependencies() []SyncReference { return withKinds(in.Spec.DependsOn, "GitSync") }

// HealthChecks are the GitSync's spec.healthCheckExprs and spec.timeout.
func (in *GitSync) HealthChecks() ([]HealthCheck, *metav1.Duration) {
	return in.Spec.HealthCheckExprs, in.Spec.Timeout
}

// SetClusters sets the GitSync's status.clusters.
func (in *GitSync) SetClusters(counts *ClusterCounts) { in.Status.Clusters = counts }

// Clusters is the GitSync's status.clusters.
func (in *GitSync) Clusters() *ClusterCounts { return in.Status.Clusters }

// PostBuildSpec is the GitSync's spec.postBuild.
func (in *GitSync) PostBuildSpec() *PostBuild { return in.Spec.PostBuild }

// DecryptionSpec is the GitSync's spec.decryption.
func (in *GitSync) DecryptionSpec() *Decryption { return in.Spec.Decryption }

// Suspended says whether spec.suspend holds the GitSync.
func (in *GitSync) Suspended() bool { return in.Spec.Suspend }

// SelectsClusters says whether the GitSync fans out by clusterSelector.
func (in *GitSync) SelectsClusters() bool { return in.Spec.Destination.ClusterSelector != nil }

// SourceURL is the GitSync's spec.source.url.
func (in *GitSync) SourceURL() string { return in.Spec.Source.URL }

// LastSynced is when the GitSync last asked its source for its revision.
func (in *GitSync) LastSynced() *metav1.Time { return in.Status.LastSyncTime }

// Fetched is the revision the GitSync fetched last.
func (in *GitSync) Fetched() *SourceStatus { return in.Status.Source }

// Syncs are the list's items.
func (in *GitSyncList) Syncs() []Sync {
	out := make([]Sync, len(in.Items))
	for i := range in.Items {
		out[i] = &in.Items[i]
	}
	return out
}

// SyncKind describes the OCISync kind.
func (in *OCISync) SyncKind() SyncKind { return LookupSyncKind("OCISync") }

// RolloutSpec is the OCISync's spec.rollout.
func (in *OCISync) RolloutSpec() *RolloutSpec { return in.Spec.Rollout }

// RolloutStatus is the OCISync's status.rollout.
func (in *OCISync) RolloutStatus() *RolloutStatus { return in.Status.Rollout }

// Bundles are the OCISync's bundles.
func (in *OCISync) Bundles() []BundleStatus { return in.Status.Bundles }

// StatusConditions gives the OCISync's conditions to shared condition helpers.
func (in *OCISync) StatusConditions() *[]metav1.Condition { return &in.Status.Conditions }

// Options are the OCISync's spec beside its source.
func (in *OCISync) Options() *SyncOptions { return &in.Spec.SyncOptions }

// SourceStatus is the OCISync's status.
func (in *OCISync) SourceStatus() *SourceSyncStatus { return &in.Status }

// Waits says whether the OCISync's Ready waits for its bundles to be in effect.
func (in *OCISync) Waits() bool { return in.Spec.Wait == nil || *in.Spec.Wait }

// Dependencies are the OCISync's spec.dependsOn, each with its kind.
func (in *OCISync) Dependencies() []SyncReference { return withKinds(in.Spec.DependsOn, "OCISync") }

// HealthChecks are the OCISync's spec.healthCheckExprs and spec.timeout.
func (in *OCISync) HealthChecks() ([]HealthCheck, *metav1.Duration) {
	return in.Spec.HealthCheckExprs, in.Spec.Timeout
}

// SetClusters sets the OCISync's status.clusters.
func (in *OCISync) SetClusters(counts *ClusterCounts) { in.Status.Clusters = counts }

// Clusters is the OCISync's status.clusters.
func (in *OCISync) Clusters() *ClusterCounts { return in.Status.Clusters }

// PostBuildSpec is the OCISync's spec.postBuild.
func (in *OCISync) PostBuildSpec() *PostBuild { return in.Spec.PostBuild }

// DecryptionSpec is the OCISync's spec.decryption.
func (in *OCISync) DecryptionSpec() *Decryption { return in.Spec.Decryption }

// Suspended says whether spec.suspend holds the OCISync.
func (in *OCISync) Suspended() bool { return in.Spec.Suspend }

// SelectsClusters says whether the OCISync fans out by clusterSelector.
func (in *OCISync) SelectsClusters() bool { return in.Spec.Destination.ClusterSelector != nil }

// SourceURL is the OCISync's spec.source.url.
func (in *OCISync) SourceURL() string { return in.Spec.Source.URL }

// LastSynced is when the OCISync last asked its source for its revision.
func (in *OCISync) LastSynced() *metav1.Time { return in.Status.LastSyncTime }

// Fetched is the revision the OCISync fetched last.
func (in *OCISync) Fetched() *SourceStatus { return in.Status.Source }

// Syncs are the list's items.
func (in *OCISyncList) Syncs() []Sync {
	out := make([]Sync, len(in.Items))
	for i := range in.Items {
		out[i] = &in.Items[i]
	}
	return out
}

// SyncKind describes the HelmSync kind.
func (in *HelmSync) SyncKind() SyncKind { return LookupSyncKind("HelmSync") }

// RolloutSpec is the HelmSync's spec.rollout.
func (in *HelmSync) RolloutSpec() *RolloutSpec { return in.Spec.Rollout }

// RolloutStatus is the HelmSync's status.rollout.
func (in *HelmSync) RolloutStatus() *RolloutStatus { return in.Status.Rollout }

// Bundles are the HelmSync's renderings, one per destination cluster.
func (in *HelmSync) Bundles() []BundleStatus { return in.Status.Bundles }

// StatusConditions gives the HelmSync's conditions to shared condition helpers.
func (in *HelmSync) StatusConditions() *[]metav1.Condition { return &in.Status.Conditions }

// Options are the HelmSync's spec beside its chart.
func (in *HelmSync) Options() *SyncOptions { return &in.Spec.SyncOptions }

// SourceStatus is the HelmSync's status.
func (in *HelmSync) SourceStatus() *SourceSyncStatus { return &in.Status }

// Waits says whether the HelmSync's Ready waits for its bundles to be in effect.
func (in *HelmSync) Waits() bool { return in.Spec.Wait == nil || *in.Spec.Wait }

// Dependencies are the HelmSync's spec.dependsOn, each with its kind.
func (in *HelmSync) Dependencies() []SyncReference { return withKinds(in.Spec.DependsOn, "HelmSync") }

// HealthChecks are the HelmSync's spec.healthCheckExprs and spec.timeout.
func (in *HelmSync) HealthChecks() ([]HealthCheck, *metav1.Duration) {
	return in.Spec.HealthCheckExprs, in.Spec.Timeout
}

// SetClusters sets the HelmSync's status.clusters.
func (in *HelmSync) SetClusters(counts *ClusterCounts) { in.Status.Clusters = counts }

// Clusters is the HelmSync's status.clusters.
func (in *HelmSync) Clusters() *ClusterCounts { return in.Status.Clusters }

// Suspended says whether spec.suspend holds the HelmSync.
func (in *HelmSync) Suspended() bool { return in.Spec.Suspend }

// SelectsClusters says whether the HelmSync fans out by clusterSelector.
func (in *HelmSync) SelectsClusters() bool { return in.Spec.Destination.ClusterSelector != nil }

// SourceURL is the HelmSync's spec.source.repoURL.
func (in *HelmSync) SourceURL() string { return in.Spec.Source.RepoURL }

// LastSynced is when the HelmSync last asked its repository for its version.
func (in *HelmSync) LastSynced() *metav1.Time { return in.Status.LastSyncTime }

// Fetched is the chart version the HelmSync fetched last.
func (in *HelmSync) Fetched() *SourceStatus { return in.Status.Source }

// Syncs are the list's items.
func (in *HelmSyncList) Syncs() []Sync {
	out := make([]Sync, len(in.Items))
	for i := range in.Items {
		out[i] = &in.Items[i]
	}
	return out
}

// Branch is the Infrahub branch the InfrahubSync reads: spec.source.targetBranch, else
// main.
func (in *InfrahubSync) Branch() string {
	if b := in.Spec.Source.TargetBranch; b != "" {
		return b
	}
	return "main"
}

// RefPreviews are a sync's previews of refs before they merge (a GitSync's refs, an
// InfrahubSync's branches) and the patterns its spec.previews names; false for a kind
// that previews none.
func RefPreviews(s Sync) (previews []RefPreview, patterns []string, ok bool) {
	switch o := s.(type) {
	case *GitSync:
		if o.Spec.Previews != nil {
			patterns = o.Spec.Previews.Refs
		}
		return o.Status.Previews, patterns, true
	case *InfrahubSync:
		if o.Spec.Previews != nil {
			patterns = o.Spec.Previews.Branches
		}
		return o.Status.Previews, patterns, true
	}
	return nil, nil, false
}

// ClusterCounts counts the clusters a sync delivers to by the state of its
// VidraResources there.
type ClusterCounts struct {
	// Total is how many clusters the sync delivers to.
	Total int32 `json:"total"`
	// Ready: each of its VidraResources there is Ready at the sync's current revision.
	Ready int32 `json:"ready"`
	// Progressing: one is being applied, becoming healthy, or waiting for its wave.
	Progressing int32 `json:"progressing"`
	// Failed: one failed there.
	Failed int32 `json:"failed"`
}

// withKinds are refs, each naming kind where it names none.
func withKinds(refs []SyncReference, kind string) []SyncReference {
	if len(refs) == 0 {
		return nil
	}
	out := make([]SyncReference, len(refs))
	for i, ref := range refs {
		if ref.Kind == "" {
			ref.Kind = kind
		}
		out[i] = ref
	}
	return out
}
