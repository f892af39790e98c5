package vmrollout

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// running is a restartable, observed VM with a Ready VMI.
func running(name string, restartRequired bool) vmView {
	return vmView{key: key(name), restartable: true, observed: true, restartRequired: restartRequired, vmiUID: types.UID(name + "-vmi-1"), vmiReady: true}
}

func rolling(maxUnavailable intstr.IntOrString) vidrav1alpha1.VMRolloutSpec {
	return vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutRolling, MaxUnavailable: &maxUnavailable}
}

func restarted(p plan) []string {
	var out []string
	for k, s := range p.steps {
		if s == stepRestart {
			out = append(out, k.Name)
		}
	}
	return out
}

func TestPlanRestartsWithinTheBudget(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name        string
		spec        vidrav1alpha1.VMRolloutSpec
		vms         []vmView
		wantRestart int
		wantPhase   vidrav1alpha1.VMRolloutPhase
	}{
		{"rolling 2 of 5", rolling(intstr.FromInt32(2)), []vmView{running("a", true), running("b", true), running("c", true), running("d", false), running("e", true)}, 2, vidrav1alpha1.VMRolloutProgressing},
		{"an unavailable VM uses the budget", rolling(intstr.FromInt32(2)), []vmView{running("a", true), running("b", true), {key: key("c"), restartable: true, observed: true}}, 1, vidrav1alpha1.VMRolloutProgressing},
		{"percentage rounds up", rolling(intstr.FromString("30%")), []vmView{running("a", true), running("b", true), running("c", true), running("d", true)}, 2, vidrav1alpha1.VMRolloutProgressing},
		{"small percentage is at least one", rolling(intstr.FromString("1%")), []vmView{running("a", true), running("b", true)}, 1, vidrav1alpha1.VMRolloutProgressing},
		{"immediate restarts all", vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutImmediate}, []vmView{running("a", true), running("b", true), running("c", true)}, 3, vidrav1alpha1.VMRolloutProgressing},
		{"manual restarts none", vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutManual}, []vmView{running("a", true), running("b", true)}, 0, vidrav1alpha1.VMRolloutIdle},
		{"halted VMs are never restarted", rolling(intstr.FromInt32(5)), []vmView{{key: key("h"), observed: true, restartRequired: true}}, 0, vidrav1alpha1.VMRolloutCompleted},
		{"nothing to do", rolling(intstr.FromInt32(1)), []vmView{running("a", false)}, 0, vidrav1alpha1.VMRolloutCompleted},
		{"unobserved VMs wait", rolling(intstr.FromInt32(1)), []vmView{{key: key("a"), restartable: true, vmiUID: "x", vmiReady: true}}, 0, vidrav1alpha1.VMRolloutProgressing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := makePlan(tt.vms, tt.spec, 1, now)
			if got := restarted(p); len(got) != tt.wantRestart {
				t.Errorf("restarts %v, want %d", got, tt.wantRestart)
			}
			if p.status.Phase != tt.wantPhase {
				t.Errorf("phase %s, want %s", p.status.Phase, tt.wantPhase)
			}
		})
	}
}

func TestPlanFollowsRecordedRestarts(t *testing.T) {
	now := time.Now()
	spec := vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutRolling, ReadyTimeout: nil}
	old := types.UID("a-vmi-1")
	inFlight := &restartRecord{fromVMI: old, started: now.Add(-2 * time.Second), generation: 1}

	// Back with a new Ready VMI and no RestartRequired: succeeded.
	back := vmView{key: key("a"), restartable: true, observed: true, vmiUID: "a-vmi-2", vmiReady: true, restart: inFlight}
	if p := makePlan([]vmView{back}, spec, 1, now); p.steps[key("a")] != stepSucceeded || p.status.Updated != 1 {
		t.Errorf("a VM back with its new spec: step %v, status %+v", p.steps[key("a")], p.status)
	}

	// Still the old VMI long after the record: asked again (the operator stopped in between).
	stuck := vmView{key: key("a"), restartable: true, observed: true, restartRequired: true, vmiUID: old, vmiReady: true,
		restart: &restartRecord{fromVMI: old, started: now.Add(-time.Minute), generation: 1}}
	p := makePlan([]vmView{stuck, running("b", true)}, spec, 1, now)
	if p.steps[key("a")] != stepReissue || p.steps[key("b")] == stepRestart {
		t.Errorf("a recorded restart never made: steps %v (b must wait: the budget is 1)", p.steps)
	}

	// Not back within readyTimeout: failed, and the rollout pauses.
	late := vmView{key: key("a"), restartable: true, observed: true, vmiUID: "a-vmi-2",
		restart: &restartRecord{fromVMI: old, started: now.Add(-11 * time.Minute), generation: 1}}
	p = makePlan([]vmView{late, running("b", true)}, spec, 1, now)
	if p.steps[key("a")] != stepFailed || p.status.Phase != vidrav1alpha1.VMRolloutPaused || len(p.failed) != 1 || p.steps[key("b")] == stepRestart {
		t.Errorf("a restart past its timeout: steps %v, phase %s, failed %v", p.steps, p.status.Phase, p.failed)
	}

	// A failure of an older generation is forgotten: the VidraResource changed.
	failedBefore := late
	failedBefore.restart = &restartRecord{fromVMI: old, started: now.Add(-time.Hour), generation: 1, failed: true}
	failedBefore.restartRequired = true
	p = makePlan([]vmView{failedBefore}, spec, 2, now)
	if p.status.Phase == vidrav1alpha1.VMRolloutPaused || (p.steps[key("a")] != stepForget && p.steps[key("a")] != stepRestart) {
		t.Errorf("a failure of an older generation: steps %v, phase %s", p.steps, p.status.Phase)
	}
}

// Each VM is counted once, where it stands: a mixed fleet's status, steps and waits.
func TestPlanCountsEachVMWhereItStands(t *testing.T) {
	now := time.Now()
	back := vmView{key: key("g"), restartable: true, observed: true, vmiUID: "g-vmi-2", vmiReady: true,
		restart: &restartRecord{fromVMI: "g-vmi-1", started: now.Add(-time.Minute), generation: 1}}
	inFlight := vmView{key: key("f"), restartable: true, observed: true, restartRequired: true, vmiUID: "f-vmi-1", vmiReady: true,
		restart: &restartRecord{fromVMI: "f-vmi-1", started: now.Add(-2 * time.Second), generation: 1}}
	vms := []vmView{
		back, inFlight, running("b", false), running("a", true),
		{key: key("c"), observed: true, restartRequired: true, vmiUID: "c-vmi-1", vmiReady: true}, // halted
		{key: key("d"), restartable: true, vmiUID: "d-vmi-1", vmiReady: true},                     // not observed yet
		{key: key("e"), restartable: true, observed: true},                                        // no VMI
	}
	p := makePlan(vms, rolling(intstr.FromInt32(3)), 1, now)
	want := vidrav1alpha1.VMRolloutStatus{Phase: vidrav1alpha1.VMRolloutProgressing, Total: 7, Updated: 3, Pending: 1, Unavailable: 2}
	if p.status != want {
		t.Errorf("status %+v, want %+v", p.status, want)
	}
	wantSteps := map[types.NamespacedName]step{key("a"): stepRestart, key("g"): stepSucceeded}
	if len(p.steps) != len(wantSteps) || p.steps[key("a")] != stepRestart || p.steps[key("g")] != stepSucceeded {
		t.Errorf("steps %v, want %v", p.steps, wantSteps)
	}
	if len(p.held) != 1 || p.held[0] != "ns/c" || p.unobserved != 1 || !p.waiting || len(p.failed) != 0 {
		t.Errorf("held %v, unobserved %d, waiting %v, failed %v", p.held, p.unobserved, p.waiting, p.failed)
	}
}
