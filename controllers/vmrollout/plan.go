package vmrollout

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// vmView is what the plan needs to know of one VirtualMachine.
type vmView struct {
	key types.NamespacedName
	// restartable: KubeVirt keeps it running (runStrategy Always or RerunOnFailure), so a
	// restart brings it back. Halted, Manual and Once VMs are never restarted.
	restartable bool
	// restartRequired: KubeVirt's RestartRequired condition is True.
	restartRequired bool
	// vmiUID is the UID of its VMI ("" when there is none); vmiReady whether it is Ready.
	vmiUID   types.UID
	vmiReady bool
	vmiGoing bool // the VMI is being deleted
	// observed: KubeVirt has seen the VM's current spec (status.observedGeneration), so
	// restartRequired is current.
	observed bool
	// restart is the restart recorded on the VM, nil when none is under way.
	restart *restartRecord
}

// restartRecord is what is written on a VM before it is restarted, so an operator
// restart neither repeats nor forgets it.
type restartRecord struct {
	// fromVMI is the UID of the VMI the restart replaces.
	fromVMI types.UID
	started time.Time
	// generation of the VidraResource the restart belongs to.
	generation int64
	// failed is set once the VM did not come back within readyTimeout.
	failed bool
}

// step is what the reconciler does with one VM.
type step int

const (
	stepNone step = iota
	// stepRestart starts a restart.
	stepRestart
	// stepReissue repeats a recorded restart whose VMI was never replaced (the operator
	// stopped between recording and asking).
	stepReissue
	// stepSucceeded clears the record of a restart that brought the VM back.
	stepSucceeded
	// stepFailed marks a restart that did not bring the VM back in time.
	stepFailed
	// stepForget clears the record of a failed restart of an older generation: the
	// VidraResource changed, so the VM gets a fresh chance.
	stepForget
)

// plan is the rollout of one VidraResource at one moment.
type plan struct {
	steps  map[types.NamespacedName]step
	status vidrav1alpha1.VMRolloutStatus
	// failed names the VMs whose restart failed, with why.
	failed []string
	// held are VMs needing a restart that their run strategy forbids.
	held []string
	// unobserved counts VMs whose current spec KubeVirt has not seen yet.
	unobserved int
	// waiting is true while restarts are under way or pending: poll again soon.
	waiting bool
}

// reissueAfter is how long a recorded restart may leave its VMI in place before it is
// asked for again.
const reissueAfter = 10 * time.Second

// makePlan decides, from the VMs as they are, which to restart now under the rollout
// settings, and counts them for the status: each VM with a restart under way is followed,
// each other one judged, then the candidates scheduled.
func makePlan(vms []vmView, spec vidrav1alpha1.VMRolloutSpec, generation int64, now time.Time) plan {
	sort.Slice(vms, func(i, j int) bool { return vms[i].key.String() < vms[j].key.String() })
	p := &plan{steps: map[types.NamespacedName]step{}}
	timeout := readyTimeout(spec)
	restartable := 0
	var candidates []types.NamespacedName
	for _, vm := range vms {
		p.status.Total++
		if vm.restartable {
			restartable++
		}
		if vm.restart != nil && p.followRestart(vm, generation, now, timeout) {
			continue
		}
		if p.judge(vm) {
			candidates = append(candidates, vm.key)
		}
	}
	p.schedule(candidates, spec, restartable)
	p.status.Phase = phase(*p, spec)
	return *p
}

// followRestart takes the VM's recorded restart a step on, and says whether that is all
// there is to it; false for the failure of an older generation, which is forgotten (the
// VidraResource changed) and the VM judged afresh.
func (p *plan) followRestart(vm vmView, generation int64, now time.Time, timeout time.Duration) bool {
	r := vm.restart
	switch {
	case r.failed && r.generation != generation:
		p.steps[vm.key] = stepForget
		p.waiting = true
		return false
	case vm.vmiUID != "" && vm.vmiUID != r.fromVMI && vm.vmiReady && !vm.restartRequired:
		p.steps[vm.key] = stepSucceeded
		p.status.Updated++
	case r.failed || now.Sub(r.started) > timeout:
		if !r.failed {
			p.steps[vm.key] = stepFailed
		}
		p.status.Failed++
		p.status.Unavailable++
		p.failed = append(p.failed, fmt.Sprintf("%s: %s", vm.key, whyNotBack(vm, r, timeout)))
	default:
		if vm.vmiUID == r.fromVMI && !vm.vmiGoing && now.Sub(r.started) > reissueAfter {
			p.steps[vm.key] = stepReissue
		}
		p.status.Unavailable++
		p.waiting = true
	}
	return true
}

// judge counts a VM with no restart under way, and says whether it is a candidate for one.
func (p *plan) judge(vm vmView) bool {
	if vm.restartable && (vm.vmiUID == "" || !vm.vmiReady) {
		p.status.Unavailable++
	}
	switch {
	case !vm.observed:
		// Whether it needs a restart is not known yet.
		p.unobserved++
		p.waiting = true
	case vm.restartRequired && vm.restartable:
		p.status.Pending++
		return true
	case vm.restartRequired:
		p.held = append(p.held, vm.key.String())
	default:
		p.status.Updated++
	}
	return false
}

// schedule restarts the candidates the strategy lets go now: every one (Immediate), as
// many as maxUnavailable leaves room for (Rolling), or none (Manual: restarts are for a
// person to make; and once a restart failed, the rollout is paused).
func (p *plan) schedule(candidates []types.NamespacedName, spec vidrav1alpha1.VMRolloutSpec, restartable int) {
	if len(candidates) == 0 || len(p.failed) > 0 || spec.Strategy == vidrav1alpha1.VMRolloutManual {
		return
	}
	p.waiting = true
	n := len(candidates)
	if spec.Strategy != vidrav1alpha1.VMRolloutImmediate {
		n = min(n, max(maxUnavailable(spec, restartable)-int(p.status.Unavailable), 0))
	}
	for _, key := range candidates[:n] {
		p.steps[key] = stepRestart
	}
}

func phase(p plan, spec vidrav1alpha1.VMRolloutSpec) vidrav1alpha1.VMRolloutPhase {
	switch {
	case len(p.failed) > 0:
		return vidrav1alpha1.VMRolloutPaused
	case p.status.Total == 0:
		return vidrav1alpha1.VMRolloutIdle
	case spec.Strategy == vidrav1alpha1.VMRolloutManual && p.status.Pending > 0 && p.unobserved == 0:
		return vidrav1alpha1.VMRolloutIdle
	case p.waiting:
		return vidrav1alpha1.VMRolloutProgressing
	}
	return vidrav1alpha1.VMRolloutCompleted
}

func whyNotBack(vm vmView, r *restartRecord, timeout time.Duration) string {
	var reasons []string
	switch {
	case vm.vmiUID == "":
		reasons = append(reasons, "no VMI")
	case vm.vmiUID == r.fromVMI:
		reasons = append(reasons, "its VMI was not replaced")
	case !vm.vmiReady:
		reasons = append(reasons, "its new VMI is not Ready")
	}
	if vm.restartRequired {
		reasons = append(reasons, "RestartRequired is still True")
	}
	return fmt.Sprintf("not back within %s of its restart (%s)", timeout, strings.Join(reasons, ", "))
}

// Defaults of VMRolloutSpec, for VidraResources without one.
const (
	defaultReadyTimeout   = 10 * time.Minute
	defaultMaxUnavailable = 1
)

func readyTimeout(spec vidrav1alpha1.VMRolloutSpec) time.Duration {
	if spec.ReadyTimeout != nil && spec.ReadyTimeout.Duration > 0 {
		return spec.ReadyTimeout.Duration
	}
	return defaultReadyTimeout
}

// maxUnavailable is maxUnavailable as a number of VMs: a percentage of the restartable
// VMs rounded up, and at least 1.
func maxUnavailable(spec vidrav1alpha1.VMRolloutSpec, restartable int) int {
	if spec.MaxUnavailable == nil {
		return defaultMaxUnavailable
	}
	if spec.MaxUnavailable.Type == intstr.Int {
		return max(spec.MaxUnavailable.IntValue(), 1)
	}
	var pct int
	if _, err := fmt.Sscanf(spec.MaxUnavailable.StrVal, "%d%%", &pct); err != nil {
		return defaultMaxUnavailable
	}
	return max(int(math.Ceil(float64(restartable)*float64(pct)/100)), 1)
}
