package vmrollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/kubevirtsim"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// startOperator runs the operator until stop is called or the test ends.
func startOperator(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	op, err := testoperator.Start(ctx, fleet, testoperator.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-op.Stopped
		}
	}
	t.Cleanup(stop)
	return stop
}

// vmSpec is what the tests vary in a VM.
type vmSpec struct {
	name        string
	runStrategy string
	memory      string // spec.template.spec.domain.resources.requests.memory: a restart applies it
	sockets     int    // spec.template.spec.domain.cpu.sockets: live-updatable
}

// vms are n VMs vm-0, vm-1, ... that run Always, with memory.
func vms(n int, memory string) []vmSpec {
	var out []vmSpec
	for i := range n {
		out = append(out, vmSpec{name: fmt.Sprintf("vm-%d", i), runStrategy: "Always", memory: memory, sockets: 1})
	}
	return out
}

func manifestOf(specs []vmSpec) string {
	var docs []string
	for _, s := range specs {
		docs = append(docs, fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: %s
spec:
  runStrategy: %s
  template:
    metadata:
      labels: {app: %s}
    spec:
      domain:
        cpu: {sockets: %d}
        devices: {}
        resources:
          requests: {memory: %s}
`, s.name, s.runStrategy, s.name, s.sockets, s.memory))
	}
	return strings.Join(docs, "---\n")
}

// deliverVMs creates a VidraResource of VMs for a member namespace, removed when the
// test ends.
func deliverVMs(t *testing.T, name string, member *testfleet.Cluster, ns string, specs []vmSpec, rollout *vidrav1alpha1.VMRolloutSpec) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Destination: vidrav1alpha1.Destination{Cluster: member.Name, Namespace: ns, ReconcileOnEvents: true},
			Manifest:    manifestOf(specs),
			VMRollout:   rollout,
		},
	}
	if err := fleet.Hub.Client.Create(context.Background(), vr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeVR(t, name) })
}

// removeVR deletes a VidraResource and waits until the operator has released its VMs.
func removeVR(t *testing.T, name string) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := fleet.Hub.Client.Delete(context.Background(), vr); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraResource "+name+" gone", func() (bool, error) {
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, &vidrav1alpha1.VidraResource{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// updateVMs replaces the VidraResource's VMs.
func updateVMs(t *testing.T, name string, specs []vmSpec) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"manifest": manifestOf(specs)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Patch(context.Background(), vr, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// allRunning waits until every VM of specs with runStrategy Always has a Ready VMI
// on the member, then starts measuring unavailability afresh.
func allRunning(t *testing.T, member *testfleet.Cluster, ns string, specs []vmSpec) {
	t.Helper()
	testfleet.Eventually(t, 60*time.Second, "VMs running on "+member.Name, func() (bool, error) {
		for _, s := range specs {
			if s.runStrategy != "Always" {
				continue
			}
			vm := &kubevirtv1.VirtualMachine{}
			if err := member.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: s.name}, vm); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if !vm.Status.Ready {
				return false, nil
			}
		}
		return true, nil
	})
	simulators[member.Name].ResetMaxUnavailable(ns)
}

// rollout waits until the VidraResource's VMRollout condition has status and reason, and
// returns the VidraResource.
func rollout(t *testing.T, name string, status metav1.ConditionStatus, reason string, timeout time.Duration) *vidrav1alpha1.VidraResource {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last VMRollout condition of %s: %s", name, last)
		}
	}()
	testfleet.Eventually(t, timeout, fmt.Sprintf("%s VMRollout=%s (%s)", name, status, reason), func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vr); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionVMRollout)
		if c != nil {
			last = fmt.Sprintf("%s %s: %s (generation %d of %d); %+v", c.Status, c.Reason, c.Message, c.ObservedGeneration, vr.Generation, vr.Status.VMRollout)
		}
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == vr.Generation, nil
	})
	return vr
}

func rolloutMessage(vr *vidrav1alpha1.VidraResource) string {
	if c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionVMRollout); c != nil {
		return c.Message
	}
	return ""
}

// restarts counts each VM's restarts in the simulator's journal.
func restarts(member *testfleet.Cluster, ns string, specs []vmSpec) map[string]int {
	out := map[string]int{}
	for _, s := range specs {
		out[s.name] = simulators[member.Name].Restarts(types.NamespacedName{Namespace: ns, Name: s.name})
	}
	return out
}

// restartAPICalls counts the restart-API calls the simulator served for a namespace
// since a time.
func restartAPICalls(member *testfleet.Cluster, ns string, since time.Time) int {
	n := 0
	for _, e := range simulators[member.Name].Journal() {
		if e.VM.Namespace == ns && e.Action == kubevirtsim.ActionRestartAPI && e.Time.After(since) {
			n++
		}
	}
	return n
}

func count(n int) *intstr.IntOrString {
	v := intstr.FromInt32(int32(n)) //nolint:gosec // small test numbers
	return &v
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
