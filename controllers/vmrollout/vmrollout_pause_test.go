package vmrollout_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A restarted VM that does not come back Ready within readyTimeout pauses the rollout: a
// condition names it and why, nothing more is restarted; once it recovers the rollout
// goes on.
func TestAVMThatDoesNotComeBackPausesTheRollout(t *testing.T) {
	startOperator(t)
	member := fleet.Members[1]
	const ns = "paused"
	before, after := vms(3, "64Mi"), vms(3, "128Mi")
	deliverVMs(t, "paused", member, ns, before, &vidrav1alpha1.VMRolloutSpec{
		Strategy: vidrav1alpha1.VMRolloutRolling, MaxUnavailable: count(1), ReadyTimeout: &metav1.Duration{Duration: 3 * time.Second},
	})
	allRunning(t, member, ns, before)

	// Every VM fails to come back, so whichever the rollout restarts first (the first in
	// name order among those KubeVirt has seen the new spec of) pauses it.
	for _, vm := range after {
		simulators[member.Name].SetNeverReady(types.NamespacedName{Namespace: ns, Name: vm.name}, true)
	}
	updateVMs(t, "paused", after)
	vr := rollout(t, "paused", metav1.ConditionFalse, vidrav1alpha1.ReasonVMRolloutPaused, 30*time.Second)
	if s := vr.Status.VMRollout; s == nil || s.Phase != vidrav1alpha1.VMRolloutPaused || s.Failed != 1 || s.Pending != 2 {
		t.Errorf("vmRollout = %+v", s)
	}
	time.Sleep(2 * time.Second) // a paused rollout that went on would have restarted another by now
	got := restarts(member, ns, after)
	var restarted []string
	for name, n := range got {
		if n > 0 {
			restarted = append(restarted, name)
		}
	}
	if len(restarted) != 1 || got[restarted[0]] != 1 {
		t.Fatalf("restarts while paused: %v (want one VM restarted once)", got)
	}
	if msg := rolloutMessage(vr); !containsAll(msg, "paused/"+restarted[0], "not back within 3s", "new VMI is not Ready") {
		t.Errorf("VMRollout message = %q", msg)
	}

	for _, vm := range after {
		simulators[member.Name].SetNeverReady(types.NamespacedName{Namespace: ns, Name: vm.name}, false)
	}
	rollout(t, "paused", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, 60*time.Second)
	testfleet.Eventually(t, 10*time.Second, "each VM restarted once", func() (bool, error) {
		got := restarts(member, ns, after)
		return got["vm-0"] == 1 && got["vm-1"] == 1 && got["vm-2"] == 1, nil
	})
}
