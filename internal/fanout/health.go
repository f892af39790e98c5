package fanout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// updatedAt is when a rollout moved the VidraResource to its content: the annotation, or
// its creation.
func updatedAt(vr *vidrav1alpha1.VidraResource) time.Time {
	if t, err := time.Parse(time.RFC3339, vr.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation]); err == nil {
		return t
	}
	return vr.CreationTimestamp.Time
}

// healthy says whether a VidraResource is healthy for the spec it has now: Ready for its
// generation and, when it delivers VirtualMachines, their rollout Completed.
func healthy(vr *vidrav1alpha1.VidraResource) (bool, string) {
	if vr.Status.ObservedGeneration != vr.Generation {
		return false, "not yet reconciled"
	}
	ready := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	switch {
	case ready == nil || ready.ObservedGeneration != vr.Generation:
		return false, "not yet reconciled"
	case ready.Status != metav1.ConditionTrue:
		return false, ready.Reason + ": " + ready.Message
	}
	if slices.ContainsFunc(vr.Status.ManagedResources, func(m vidrav1alpha1.ManagedResource) bool {
		return m.Kind == "VirtualMachine" && strings.HasPrefix(m.APIVersion, "kubevirt.io/")
	}) {
		vm := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionVMRollout)
		switch {
		case vm == nil || vm.ObservedGeneration != vr.Generation:
			return false, "VM rollout not yet started"
		case vm.Status != metav1.ConditionTrue:
			return false, "VM rollout: " + vm.Message
		}
	}
	return true, ""
}

// reconciled says whether the VidraResource's own reconcile reported on the spec it has
// now: its health is what the cluster shows, not a write still on its way.
func reconciled(vr *vidrav1alpha1.VidraResource) bool {
	ready := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	return vr.Status.ObservedGeneration == vr.Generation && ready != nil && ready.ObservedGeneration == vr.Generation
}

// clusterLabels are the labels of every enrolled cluster, by name.
func (d *Delivery) clusterLabels(ctx context.Context) (map[string]map[string]string, error) {
	var clusters vidrav1alpha1.VidraClusterList
	if err := d.cfg.Hub.List(ctx, &clusters); err != nil {
		return nil, fmt.Errorf("list VidraClusters: %w", err)
	}
	out := make(map[string]map[string]string, len(clusters.Items))
	for _, vc := range clusters.Items {
		out[vc.Name] = vc.Labels
	}
	return out, nil
}

// MarkRolledOut sets the sync's RolledOut condition from its rollout's phase.
func MarkRolledOut(sync conditions.Object, st vidrav1alpha1.RolloutStatus) {
	status := metav1.ConditionFalse
	if st.Phase == vidrav1alpha1.RolloutCompleted {
		status = metav1.ConditionTrue
	}
	conditions.Set(sync, vidrav1alpha1.ConditionRolledOut, status, string(st.Phase), st.Message)
}
