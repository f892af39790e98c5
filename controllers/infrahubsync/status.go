package infrahubsync

import (
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/conditions"
)

// The conditions follow kstatus (Reconciling while syncing, Stalled when only a change
// of the InfrahubSync or its Secrets helps, Ready when every listed artifact is
// delivered); syncState and lastError mirror them for users of the original Vidra.

func markReconciling(ihs *vidrav1alpha1.InfrahubSync) {
	conditions.MarkReconciling(ihs, vidrav1alpha1.ReasonProgressing, "syncing artifacts from Infrahub")
	ihs.Status.SyncState = vidrav1alpha1.StateRunning
}

func markSucceeded(ihs *vidrav1alpha1.InfrahubSync, message string) {
	conditions.MarkReady(ihs, vidrav1alpha1.ReasonSucceeded, message)
	ihs.Status.SyncState = vidrav1alpha1.StateSucceeded
	ihs.Status.LastError = ""
}

func markFailed(ihs *vidrav1alpha1.InfrahubSync, reason, message string) {
	conditions.MarkNotReady(ihs, reason, message)
	conditions.Remove(ihs, vidrav1alpha1.ConditionReconciling)
	ihs.Status.SyncState = vidrav1alpha1.StateFailed
	ihs.Status.LastError = conditions.Bounded(message)
}

func markStalled(ihs *vidrav1alpha1.InfrahubSync, reason, message string) {
	markFailed(ihs, reason, message)
	conditions.MarkStalled(ihs, reason, message)
}

// markPending: delivered what is Ready, waiting for Infrahub to generate the rest.
func markPending(ihs *vidrav1alpha1.InfrahubSync, message string) {
	conditions.MarkNotReady(ihs, vidrav1alpha1.ReasonProgressing, message)
	conditions.MarkReconciling(ihs, vidrav1alpha1.ReasonProgressing, message)
	ihs.Status.SyncState = vidrav1alpha1.StateRunning
	ihs.Status.LastError = ""
}

// markEmpty: Infrahub listed nothing, and nothing was removed.
func markEmpty(ihs *vidrav1alpha1.InfrahubSync, kept int) {
	msg := fmt.Sprintf("Infrahub lists no artifact named %q on branch %s; the %d VidraResources made before are kept (set spec.allowEmpty: true to let an empty listing remove them)",
		ihs.Spec.Source.ArtefactName, branchOf(ihs), kept)
	conditions.MarkNotReady(ihs, vidrav1alpha1.ReasonNoArtifacts, msg)
	conditions.Remove(ihs, vidrav1alpha1.ConditionReconciling)
	ihs.Status.SyncState = vidrav1alpha1.StateStale
	ihs.Status.LastError = msg
}

func markSuspended(ihs *vidrav1alpha1.InfrahubSync) {
	conditions.Set(ihs, vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended, "suspended: nothing is listed, written or removed")
	conditions.Remove(ihs, vidrav1alpha1.ConditionReconciling)
	ihs.Status.SyncState = vidrav1alpha1.StatePending
}

// setArtifacts records the artifacts of a successful listing and their delivered
// checksums.
func setArtifacts(ihs *vidrav1alpha1.InfrahubSync, artifacts []vidrav1alpha1.ArtifactStatus) {
	ihs.Status.Artifacts = artifacts
	ihs.Status.Checksums = nil
	for _, a := range artifacts {
		if a.Checksum != "" {
			ihs.Status.Checksums = append(ihs.Status.Checksums, a.Checksum)
		}
	}
}

func statusEqual(a, b vidrav1alpha1.InfrahubSyncStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}
