package fanout

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Readiness is how far a sync's bundles are in effect on the clusters it reaches: a
// cluster is Ready when each of the sync's VidraResources there is Ready at the sync's
// current revision, Failed when one failed, else Progressing.
type Readiness struct {
	// Counts are the clusters in each state.
	Counts vidrav1alpha1.ClusterCounts
	// waiting and failed are the clusters Progressing and Failed, each with why, in
	// name order.
	waiting, failed []clusterState
}

type clusterState struct{ cluster, why string }

// clusterStates, worst last: a cluster is in the worst state of its VidraResources.
const (
	stateReady = iota
	stateProgressing
	stateFailed
)

// listedClusters bounds the clusters a readiness message names.
const listedClusters = 5

// Judge tells the readiness of a sync's VidraResources vrs: checksums are the current
// checksum of each bundle, by bundle ID; written are the names of those this reconcile
// wrote, whose status still describes what they were, by the cluster they go to.
func Judge(vrs []*vidrav1alpha1.VidraResource, checksums map[string]string, written map[string]string) Readiness {
	states := map[string]clusterState{}
	worst := map[string]int{}
	see := func(cluster string, state int, why string) {
		if cur, ok := worst[cluster]; ok && cur >= state {
			return
		}
		worst[cluster], states[cluster] = state, clusterState{cluster: cluster, why: why}
	}
	for _, cluster := range written {
		see(cluster, stateProgressing, "being applied")
	}
	for _, vr := range vrs {
		if _, ok := written[vr.Name]; ok {
			continue
		}
		state, why := judge(vr, checksums)
		see(ClusterOf(vr), state, why)
	}
	var r Readiness
	for cluster, state := range worst {
		r.Counts.Total++
		switch state {
		case stateReady:
			r.Counts.Ready++
		case stateProgressing:
			r.Counts.Progressing++
			r.waiting = append(r.waiting, states[cluster])
		default:
			r.Counts.Failed++
			r.failed = append(r.failed, states[cluster])
		}
	}
	byCluster := func(a, b clusterState) int { return strings.Compare(a.cluster, b.cluster) }
	slices.SortFunc(r.waiting, byCluster)
	slices.SortFunc(r.failed, byCluster)
	return r
}

// judge is the state of one VidraResource, and why it is not Ready.
func judge(vr *vidrav1alpha1.VidraResource, checksums map[string]string) (int, string) {
	id := vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleIDAnnotation)
	if want := checksums[id]; want != "" && vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleChecksumAnnotation) != want {
		if pinned := vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]; pinned != "" {
			return stateProgressing, "rolled back to revision " + pinned + " until the rollout resumes"
		}
		return stateProgressing, "waiting for its wave"
	}
	ok, why := healthy(vr)
	if ok {
		return stateReady, ""
	}
	if !reconciled(vr) {
		return stateProgressing, "being applied"
	}
	ready := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	if ready.Status == metav1.ConditionTrue {
		// Ready, its VirtualMachines still restarting.
		return stateProgressing, why
	}
	switch ready.Reason {
	case vidrav1alpha1.ReasonProgressing:
		return stateProgressing, strings.TrimPrefix(ready.Message, "applied; waiting for: ")
	case vidrav1alpha1.ReasonDependencyNotReady:
		return stateProgressing, ready.Message
	}
	return stateFailed, ready.Reason + ": " + ready.Message
}

// noteWritten records that this delivery wrote vr.
func (d *Delivery) noteWritten(vr *vidrav1alpha1.VidraResource) {
	d.writtenMu.Lock()
	defer d.writtenMu.Unlock()
	d.written[vr.Name] = ClusterOf(vr)
}

// Readiness tells how far the sync's bundles (as its status lists them now) are in
// effect, from the VidraResources it keeps.
func (d *Delivery) Readiness(bundles []vidrav1alpha1.BundleStatus) Readiness {
	vrs := make([]*vidrav1alpha1.VidraResource, 0, len(d.keep))
	for name := range d.keep {
		if vr := d.owned[name]; vr != nil {
			vrs = append(vrs, vr)
		}
	}
	return Judge(vrs, Checksums(bundles), d.written)
}

// Checksums are the bundles' current checksums, by ID.
func Checksums(bundles []vidrav1alpha1.BundleStatus) map[string]string {
	out := make(map[string]string, len(bundles))
	for _, b := range bundles {
		out[b.ID] = b.Checksum
	}
	return out
}

// ClusterOf is the cluster a VidraResource goes to, as people name it.
func ClusterOf(vr *vidrav1alpha1.VidraResource) string {
	switch {
	case vr.Status.Cluster != "":
		return vr.Status.Cluster
	case vr.Spec.Destination.Cluster != "":
		return vr.Spec.Destination.Cluster
	case vr.Spec.Destination.Server != "":
		return vr.Spec.Destination.Server
	}
	return vidrav1alpha1.LocalClusterName
}

// Ready says whether the bundles are in effect on every cluster.
func (r Readiness) Ready() bool { return r.Counts.Ready == r.Counts.Total }

// Failed says whether they failed on a cluster.
func (r Readiness) Failed() bool { return r.Counts.Failed > 0 }

// Failures are the clusters where they failed, each with why ("ApplyFailed: ...").
func (r Readiness) Failures() map[string]string {
	out := make(map[string]string, len(r.failed))
	for _, s := range r.failed {
		out[s.cluster] = s.why
	}
	return out
}

// Why says why the first cluster that failed, else the first that waits, is not Ready
// ("" when every cluster is).
func (r Readiness) Why() string {
	switch {
	case len(r.failed) > 0:
		return r.failed[0].why
	case len(r.waiting) > 0:
		return r.waiting[0].why
	}
	return ""
}

// Message says where the bundles are in effect, and where not and why: "Ready on 38 of
// 40 clusters; waiting for edge-7, edge-9: Deployment web/cert-manager: 0/1 replicas",
// failures first.
func (r Readiness) Message() string {
	on := fmt.Sprintf("Ready on %d of %d clusters", r.Counts.Ready, r.Counts.Total)
	switch {
	case len(r.failed) > 0:
		return "failed on " + named(r.failed) + "; " + on
	case len(r.waiting) > 0:
		return on + "; waiting for " + named(r.waiting)
	}
	return on
}

// named names the first clusters, and why the first is where it is.
func named(states []clusterState) string {
	names := make([]string, 0, listedClusters)
	for _, s := range states[:min(len(states), listedClusters)] {
		names = append(names, s.cluster)
	}
	out := strings.Join(names, ", ")
	if len(states) > listedClusters {
		out += fmt.Sprintf(" and %d more", len(states)-listedClusters)
	}
	return out + ": " + states[0].why
}
