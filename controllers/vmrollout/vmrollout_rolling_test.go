package vmrollout_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Two members with six VMs each get a spec that needs a restart: each VM is restarted
// exactly once, never more than maxUnavailable (2) at a time per member — on member-1
// through KubeVirt's restart API, on member-2 (which does not serve it) by deleting the
// VMI of these runStrategy: Always VMs.
func TestRollingRestartKeepsAtMostMaxUnavailableOnEveryMember(t *testing.T) {
	startOperator(t)
	start := time.Now()
	const ns = "rolling"
	before, after := vms(6, "64Mi"), vms(6, "128Mi")
	policy := &vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutRolling, MaxUnavailable: count(2)}
	for _, member := range fleet.Members {
		deliverVMs(t, "rolling-"+member.Name, member, ns, before, policy)
	}
	for _, member := range fleet.Members {
		allRunning(t, member, ns, before)
		rollout(t, "rolling-"+member.Name, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, 30*time.Second)
	}

	for _, member := range fleet.Members {
		updateVMs(t, "rolling-"+member.Name, after)
	}
	for _, member := range fleet.Members {
		vr := rollout(t, "rolling-"+member.Name, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, 90*time.Second)
		s := vr.Status.VMRollout
		if s == nil || s.Phase != vidrav1alpha1.VMRolloutCompleted || s.Total != 6 || s.Updated != 6 || s.Pending != 0 || s.Failed != 0 {
			t.Errorf("%s: vmRollout = %+v", member.Name, s)
		}
		for vm, n := range restarts(member, ns, after) {
			if n != 1 {
				t.Errorf("%s: VM %s restarted %d times, want 1", member.Name, vm, n)
			}
		}
		if got := simulators[member.Name].MaxUnavailable(ns); got > 2 || got == 0 {
			t.Errorf("%s: at most %d VMs were unavailable at once, want 1 or 2", member.Name, got)
		}
		t.Logf("%s: max unavailable %d, restart API calls %d", member.Name, simulators[member.Name].MaxUnavailable(ns), restartAPICalls(member, ns, start))
	}
	if n := restartAPICalls(fleet.Members[0], ns, start); n != 6 {
		t.Errorf("member-1 serves the restart API, yet %d of 6 restarts went through it", n)
	}
	if n := restartAPICalls(fleet.Members[1], ns, start); n != 0 {
		t.Errorf("member-2 does not serve the restart API, yet it answered %d restarts", n)
	}
}
