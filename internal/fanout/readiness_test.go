package fanout

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// judged is a VidraResource of bundle b at checksum, on cluster, whose Ready condition
// (for its generation) has status and reason; "" status: never reconciled.
func judged(name, cluster, checksum string, status metav1.ConditionStatus, reason, message string) *vidrav1alpha1.VidraResource {
	vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2, Annotations: map[string]string{
		vidrav1alpha1.BundleIDAnnotation: "b", vidrav1alpha1.BundleChecksumAnnotation: checksum,
	}}}
	vr.Spec.Destination.Cluster = cluster
	if status != "" {
		vr.Status.ObservedGeneration = 2
		vr.Status.Conditions = []metav1.Condition{{Type: vidrav1alpha1.ConditionReady, Status: status, Reason: reason, Message: message, ObservedGeneration: 2}}
	}
	return vr
}

func TestJudgeTellsEachClusterByItsWorstVidraResource(t *testing.T) {
	current := map[string]string{"b": "new"}
	vrs := []*vidrav1alpha1.VidraResource{
		judged("a-1", "edge-1", "new", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, "applied 3 objects"),
		judged("a-2", "edge-2", "new", metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing, "applied; waiting for: Deployment web/api: Available: 0/1 replicas"),
		judged("a-3", "edge-3", "old", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, ""),
		judged("a-4", "edge-4", "new", "", "", ""),
		// edge-5: one Ready, one failed: failed.
		judged("a-5", "edge-5", "new", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, ""),
		judged("b-5", "edge-5", "new", metav1.ConditionFalse, vidrav1alpha1.ReasonApplyFailed, "namespaces \"web\" not found"),
		// Written now: its status is of before.
		judged("a-6", "edge-6", "new", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, ""),
	}
	r := Judge(vrs, current, map[string]string{"a-6": "edge-6", "a-7": "edge-7"})
	want := vidrav1alpha1.ClusterCounts{Total: 7, Ready: 1, Progressing: 5, Failed: 1}
	if r.Counts != want {
		t.Errorf("counts = %+v, want %+v", r.Counts, want)
	}
	if r.Ready() || !r.Failed() {
		t.Errorf("Ready() = %v, Failed() = %v, want false, true", r.Ready(), r.Failed())
	}
	if got, want := r.Message(), `failed on edge-5: ApplyFailed: namespaces "web" not found; Ready on 1 of 7 clusters`; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	why := map[string]string{}
	for _, s := range r.waiting {
		why[s.cluster] = s.why
	}
	for cluster, want := range map[string]string{
		"edge-2": "Deployment web/api: Available: 0/1 replicas",
		"edge-3": "waiting for its wave",
		"edge-4": "being applied",
		"edge-6": "being applied",
		"edge-7": "being applied",
	} {
		if why[cluster] != want {
			t.Errorf("%s waits for %q, want %q", cluster, why[cluster], want)
		}
	}
}

func TestJudgeNamesTheFirstClustersOnly(t *testing.T) {
	var vrs []*vidrav1alpha1.VidraResource
	for i := range 8 {
		vrs = append(vrs, judged(fmt.Sprint("vr-", i), fmt.Sprint("edge-", i), "new", metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing, "applied; waiting for: Job web/migrate: running"))
	}
	vrs = append(vrs, judged("vr-ok", "edge-ok", "new", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, ""))
	r := Judge(vrs, map[string]string{"b": "new"}, nil)
	want := "Ready on 1 of 9 clusters; waiting for edge-0, edge-1, edge-2, edge-3, edge-4 and 3 more: Job web/migrate: running"
	if got := r.Message(); got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	all := Judge(vrs[8:], map[string]string{"b": "new"}, nil)
	if !all.Ready() || all.Message() != "Ready on 1 of 1 clusters" {
		t.Errorf("one Ready cluster: Ready() = %v, %q", all.Ready(), all.Message())
	}
}

// A VidraResource that waits for a dependency on its cluster is on its way, not failed:
// the sync waits there, saying for what.
func TestJudgeCountsAWaitForADependencyAsProgressing(t *testing.T) {
	msg := "waiting for HelmSync ingress on edge-1: Deployment ingress/controller: 0/1 replicas"
	r := Judge([]*vidrav1alpha1.VidraResource{
		judged("a-1", "edge-1", "new", metav1.ConditionFalse, vidrav1alpha1.ReasonDependencyNotReady, msg),
		judged("a-2", "edge-2", "new", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, ""),
	}, map[string]string{"b": "new"}, nil)
	if r.Failed() || r.Counts.Progressing != 1 || r.Why() != msg {
		t.Errorf("counts %+v, why %q; want edge-1 progressing, waiting for its dependency", r.Counts, r.Why())
	}
	if got := Judge(nil, nil, nil).Why(); got != "" {
		t.Errorf("Why() of nothing = %q", got)
	}
}
