package vidraresource

import (
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
)

// A reconcile takes its memo, the cluster moves to another replica while it records the
// revision, and it stores the memo after ClusterLost forgot the others. When the cluster
// comes back, that memo must not stand in for reading the history: the other replica may
// have recorded revisions meanwhile.
func TestARevisionMemoTakenBeforeAHandoverIsNotRecalled(t *testing.T) {
	r := &Reconciler{Watches: NewDriftWatches(logr.Discard(), "hub")}
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "uid-1"},
		Status:     vidrav1alpha1.VidraResourceStatus{Cluster: destination.Label("edge-1"), Revision: 3},
	}
	const digest, limit = "sha256:0a", 10

	r.revisions.Store(vr.Name, r.revisionMemoOf(vr, digest, limit))
	if !r.recalls(vr.Name, r.revisionMemoOf(vr, digest, limit)) {
		t.Fatal("a memo stored with no handover since is not recalled")
	}

	inFlight := r.revisionMemoOf(vr, digest, limit)
	r.ClusterLost("edge-1")
	if r.recalls(vr.Name, r.revisionMemoOf(vr, digest, limit)) {
		t.Fatal("ClusterLost did not forget the memo")
	}
	r.revisions.Store(vr.Name, inFlight)
	if r.recalls(vr.Name, r.revisionMemoOf(vr, digest, limit)) {
		t.Fatal("a memo taken before the cluster was lost, stored after, is recalled: the history would not be read")
	}

	r.revisions.Store(vr.Name, r.revisionMemoOf(vr, digest, limit))
	if !r.recalls(vr.Name, r.revisionMemoOf(vr, digest, limit)) {
		t.Fatal("a memo taken after the handover is not recalled")
	}

	// A VidraResource that moved to another cluster reads the history: no memo of the
	// cluster it left stands for it (neither cluster was ever lost here).
	fresh := &Reconciler{Watches: NewDriftWatches(logr.Discard(), "hub")}
	fresh.revisions.Store(vr.Name, fresh.revisionMemoOf(vr, digest, limit))
	moved := vr.DeepCopy()
	moved.Status.Cluster = destination.Label("edge-2")
	if fresh.recalls(moved.Name, fresh.revisionMemoOf(moved, digest, limit)) {
		t.Fatal("a memo of edge-1 is recalled for the VidraResource now on edge-2")
	}
}
