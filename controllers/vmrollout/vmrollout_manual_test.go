package vmrollout_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// Manual restarts nothing and says how many VMs need a restart; Halted VMs are never
// started; a change KubeVirt applies live needs no restart at all.
func TestManualHaltedAndLiveUpdatesRestartNothing(t *testing.T) {
	startOperator(t)
	member := fleet.Members[0]
	const ns = "manual"
	halted := vmSpec{name: "halted", runStrategy: "Halted", memory: "64Mi", sockets: 1}
	before := append(vms(2, "64Mi"), halted)
	deliverVMs(t, "manual", member, ns, before, &vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutManual})
	allRunning(t, member, ns, before)

	// A live-updatable change (CPU sockets): no RestartRequired, nothing to do.
	live := append(vms(2, "64Mi"), halted)
	for i := range live[:2] {
		live[i].sockets = 2
	}
	updateVMs(t, "manual", live)
	vr := rollout(t, "manual", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, 30*time.Second)
	if s := vr.Status.VMRollout; s == nil || s.Total != 3 || s.Pending != 0 {
		t.Errorf("after a live update: vmRollout = %+v", s)
	}

	// A change needing a restart: reported, not made.
	needs := append(vms(2, "128Mi"), vmSpec{name: "halted", runStrategy: "Halted", memory: "128Mi", sockets: 1})
	for i := range needs[:2] {
		needs[i].sockets = 2
	}
	updateVMs(t, "manual", needs)
	vr = rollout(t, "manual", metav1.ConditionFalse, vidrav1alpha1.ReasonVMRestartRequired, 30*time.Second)
	// KubeVirt marks each VM RestartRequired as it sees its new spec, one after the
	// other: the count reaches both running VMs, never the Halted one.
	testfleet.Eventually(t, 30*time.Second, "a VMRollout message counting both running VMs", func() (bool, error) {
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: "manual"}, vr)
		return err == nil && containsAll(rolloutMessage(vr), "2 of 3 VMs need a restart", "Manual"), err
	})
	time.Sleep(2 * time.Second) // a restart, were one made, would have shown by now
	for vm, n := range restarts(member, ns, needs) {
		if n != 0 {
			t.Errorf("VM %s restarted %d times under Manual", vm, n)
		}
	}
	for _, e := range simulators[member.Name].Journal() {
		if e.VM.Namespace == ns && e.VM.Name == "halted" {
			t.Errorf("the Halted VM was touched: %+v", e)
		}
	}
}

// Immediate restarts every VM that needs it at once.
func TestImmediateRestartsEveryVMAtOnce(t *testing.T) {
	startOperator(t)
	member := fleet.Members[0]
	const ns = "immediate"
	before, after := vms(4, "64Mi"), vms(4, "128Mi")
	deliverVMs(t, "immediate", member, ns, before, &vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutImmediate})
	allRunning(t, member, ns, before)
	// VMs that take a while to boot show whether the restarts waited for each other:
	// KubeVirt may mark the four RestartRequired a few ticks apart.
	simulators[member.Name].SetReadyAfter(3 * time.Second)
	t.Cleanup(func() { simulators[member.Name].SetReadyAfter(300 * time.Millisecond) })
	updateVMs(t, "immediate", after)
	rollout(t, "immediate", metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, 60*time.Second)
	for vm, n := range restarts(member, ns, after) {
		if n != 1 {
			t.Errorf("VM %s restarted %d times, want 1", vm, n)
		}
	}
	if got := simulators[member.Name].MaxUnavailable(ns); got != 4 {
		t.Errorf("at most %d VMs were down at once; Immediate restarts all 4 together", got)
	}
}
