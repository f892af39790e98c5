package vmrollout_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// The operator stopped mid-rollout and started again neither restarts a VM twice nor
// loses its progress: what was restarted when is recorded on the VMs.
func TestAnOperatorRestartedMidRolloutRestartsEveryVMExactlyOnce(t *testing.T) {
	stop := startOperator(t)
	member := fleet.Members[0]
	const ns = "crash"
	before, after := vms(4, "64Mi"), vms(4, "128Mi")
	deliverVMs(t, "crash", member, ns, before, &vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutRolling, MaxUnavailable: count(1)})
	allRunning(t, member, ns, before)

	updateVMs(t, "crash", after)
	testfleet.Poll(t, 10*time.Millisecond, 60*time.Second, "the rollout under way", func() (bool, error) {
		got := restarts(member, ns, after)
		return got["vm-0"] == 1, nil
	})
	stop()
	t.Logf("stopped with restarts %v", restarts(member, ns, after))

	startOperator(t)
	vr := rollout(t, "crash", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, 90*time.Second)
	if s := vr.Status.VMRollout; s == nil || s.Updated != 4 || s.Failed != 0 {
		t.Errorf("vmRollout = %+v", s)
	}
	for vm, n := range restarts(member, ns, after) {
		if n != 1 {
			t.Errorf("VM %s restarted %d times across the operator restart, want 1", vm, n)
		}
	}
	removeVR(t, "crash") // while the second operator runs to release it
}
