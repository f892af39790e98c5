// Package vmrollout completes the delivery of KubeVirt VirtualMachines: KubeVirt applies
// most template changes only after a restart and marks such VMs RestartRequired; this
// controller restarts the VMs of each VidraResource as its vmRollout says (a few at a
// time, all at once, or not at all), and pauses when one does not come back.
package vmrollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	k8sevents "k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
	"github.com/vidra-operator/vidra/internal/runtime/events"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
)

// Reconciler rolls out the VirtualMachines of one VidraResource on one cluster; requests
// name the VidraResource and carry the cluster.
type Reconciler struct {
	// Hub reads VidraResources and writes their status.
	Hub client.Client
	// Manager finds clusters by name.
	Manager mcmanager.Manager
	// HubID picks this hub's owners out of a VM's owners set.
	HubID string
	// DisableLocalCluster leaves the local cluster's VMs alone (--disable-local-cluster).
	DisableLocalCluster bool
	// Recorder records Events on VidraResources.
	Recorder k8sevents.EventRecorder
	// Metrics, when set, count restarts.
	Metrics *Metrics
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Shard, when several replicas split the fleet, says which clusters this replica
	// rolls out on. Nil: all of them.
	Shard Shard
	// Selector, when set, picks the VidraResources this controller looks after (a pull
	// cluster's agent: its copies of the hub's bundles, not the member's own).
	Selector labels.Selector

	// withoutVMs remembers, per cluster, when it was last seen not to serve
	// VirtualMachines: each look is a discovery request to the cluster.
	withoutVMs sync.Map
}

// noVMsRecheck is how long a cluster seen without KubeVirt is taken to have none: a
// KubeVirt installed meanwhile is noticed within it.
const noVMsRecheck = time.Minute

// servesVMs says whether the cluster serves VirtualMachines, asking discovery at most
// once per noVMsRecheck for a cluster that does not.
func (r *Reconciler) servesVMs(name multicluster.ClusterName, cl interface{ GetRESTMapper() meta.RESTMapper }) bool {
	if at, ok := r.withoutVMs.Load(name); ok && r.now().Sub(at.(time.Time)) < noVMsRecheck {
		return false
	}
	if servesVMs(cl) {
		r.withoutVMs.Delete(name)
		return true
	}
	r.withoutVMs.Store(name, r.now())
	return false
}

// Shard tells whether this replica owns a cluster.
type Shard interface {
	Owns(ctx context.Context, name multicluster.ClusterName) bool
}

// poll is how often a rollout in progress is looked at: VMI readiness and time-outs are
// not all announced by events on VMs.
const poll = time.Second

// notEngagedPoll is how soon a VidraResource whose cluster is not engaged is looked at
// again.
const notEngagedPoll = 5 * time.Second

// fieldManager writes the rollout's part of a VidraResource's status.
const fieldManager = "vidra-vmrollout"

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile narrates one look at a VidraResource's VMs on a cluster.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("vidraresource", req.Name, "cluster", destination.Label(req.ClusterName))

	// The VidraResource, if it still delivers to this cluster.
	vr := &vidrav1alpha1.VidraResource{}
	if err := r.Hub.Get(ctx, client.ObjectKey{Name: req.Name}, vr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vr.Status.Cluster != destination.Label(req.ClusterName) || !vr.DeletionTimestamp.IsZero() || vr.Spec.Suspend ||
		(r.Selector != nil && !r.Selector.Matches(labels.Set(vr.Labels))) {
		return ctrl.Result{}, nil
	}
	if r.Shard != nil && !r.Shard.Owns(ctx, req.ClusterName) {
		return ctrl.Result{}, nil // the replica that owns the cluster rolls it out
	}
	cl, err := r.Manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		if r.pullCluster(ctx, req.ClusterName) {
			return ctrl.Result{}, nil // its agent rolls its VMs out, on the member
		}
		// Not engaged (yet, or any more): the VidraResource shows why; look again later.
		return ctrl.Result{RequeueAfter: notEngagedPoll}, nil //nolint:nilerr // see above
	}
	if !r.servesVMs(req.ClusterName, cl) {
		return ctrl.Result{}, nil // no KubeVirt there, nothing to roll out
	}

	// Its VMs, as they are.
	vms, views, err := r.vmsOf(ctx, cl, vr.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(vms) == 0 && vr.Status.VMRollout == nil {
		return ctrl.Result{}, nil // a bundle without VMs gets no rollout status
	}
	spec := rolloutSpec(vr)
	p := makePlan(views, spec, vr.Generation, r.now())
	if vr.Status.ObservedGeneration != vr.Generation {
		// The VMs do not have the VidraResource's current spec yet: nothing is complete.
		p.waiting = true
		p.status.Phase = vidrav1alpha1.VMRolloutProgressing
	}

	// Act on the plan.
	var errs []error
	for _, vm := range vms {
		key := client.ObjectKeyFromObject(vm)
		if err := r.act(ctx, cl, vr, vm, viewOf(views, key), p.steps[key]); err != nil {
			if errors.Is(err, errNotNow) {
				log.V(1).Info("restart deferred", "vm", key.String(), "reason", err.Error())
				continue
			}
			errs = append(errs, err)
		}
	}

	// Report.
	if err := r.writeStatus(ctx, vr, p, spec, errors.Join(errs...)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	if p.waiting || len(p.failed) > 0 {
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	return ctrl.Result{}, nil
}

// act carries out one VM's step.
func (r *Reconciler) act(ctx context.Context, cl cluster.Cluster, vr *vidrav1alpha1.VidraResource, vm *kubevirtv1.VirtualMachine, view vmView, s step) error {
	if s == stepNone {
		return nil
	}
	c := cl.GetClient()
	cluster := vr.Status.Cluster
	name := vm.Namespace + "/" + vm.Name
	switch s {
	case stepRestart, stepReissue:
		record := view.restart
		if s == stepRestart {
			// Written before asking, so a restart is never made without a trace.
			record = &restartRecord{fromVMI: view.vmiUID, started: r.now(), generation: vr.Generation}
			if err := writeRecord(ctx, c, vm, record); err != nil {
				return err
			}
		}
		// The restart belongs to the change that brought the VM's new spec: the trace
		// carried on the VidraResource.
		rctx, span := tracing.Tracer().Start(tracing.Extract(ctx, vr), "vm.restart", trace.WithAttributes(
			attribute.String("vidra.vidraresource", vr.Name), attribute.String("vidra.cluster", cluster), attribute.String("vidra.vm", name)))
		via, err := restart(rctx, cl, vm, string(record.fromVMI))
		span.SetAttributes(attribute.String("vidra.restart_via", via))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		if err != nil {
			// Not made: the record goes, so the VM is pending again.
			if clearErr := writeRecord(ctx, c, vm, nil); clearErr != nil {
				err = errors.Join(err, clearErr)
			}
			if !errors.Is(err, errNotNow) {
				r.Metrics.observe(cluster, "error")
				r.event(vr, vm, corev1.EventTypeWarning, vidrav1alpha1.EventVMRestartFailed, fmt.Sprintf("VM %s on %s: %v", name, cluster, err))
			}
			return err
		}
		r.Metrics.observe(cluster, "started")
		r.event(vr, vm, corev1.EventTypeNormal, vidrav1alpha1.EventVMRestarting, fmt.Sprintf("VM %s on %s restarting (%s)", name, cluster, via))
	case stepSucceeded:
		if err := writeRecord(ctx, c, vm, nil); err != nil {
			return err
		}
		r.Metrics.observe(cluster, "succeeded")
		r.event(vr, vm, corev1.EventTypeNormal, vidrav1alpha1.EventVMRestarted, fmt.Sprintf("VM %s on %s is back, Ready, with its new spec", name, cluster))
	case stepFailed:
		record := *view.restart
		record.failed = true
		if err := writeRecord(ctx, c, vm, &record); err != nil {
			return err
		}
		r.Metrics.observe(cluster, "failed")
		r.event(vr, vm, corev1.EventTypeWarning, vidrav1alpha1.EventVMRestartTimedOut, fmt.Sprintf("VM %s on %s %s; the rollout pauses", name, cluster, whyNotBack(view, &record, readyTimeout(rolloutSpec(vr)))))
	case stepForget:
		return writeRecord(ctx, c, vm, nil)
	}
	return nil
}

// vmsOf lists the VMs this VidraResource owns on the cluster (from the cluster's cache of
// Vidra-managed VMs), with their VMIs read from the API server.
func (r *Reconciler) vmsOf(ctx context.Context, cl cluster.Cluster, vrName string) ([]*kubevirtv1.VirtualMachine, []vmView, error) {
	var list kubevirtv1.VirtualMachineList
	if err := cl.GetClient().List(ctx, &list, client.MatchingLabels{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}); err != nil {
		return nil, nil, fmt.Errorf("list VirtualMachines: %w", err)
	}
	var vms []*kubevirtv1.VirtualMachine
	var views []vmView
	for i := range list.Items {
		vm := &list.Items[i]
		if rolloutOwner(vm, r.HubID) != vrName {
			continue
		}
		view, err := viewVM(ctx, cl.GetAPIReader(), vm)
		if err != nil {
			return nil, nil, err
		}
		vms = append(vms, vm)
		views = append(views, view)
	}
	return vms, views, nil
}

// rolloutOwner is the VidraResource of this hub that rolls a VM out: the first of its
// owners, so a VM shared by several is restarted by one only.
func rolloutOwner(vm *kubevirtv1.VirtualMachine, hubID string) string {
	prefix := hubID + "/"
	owners, _ := ownership.Owners(vm) // an unreadable set names no owner
	for _, id := range owners {
		if name, ok := strings.CutPrefix(id, prefix); ok {
			return name
		}
	}
	return ""
}

func viewVM(ctx context.Context, reader client.Reader, vm *kubevirtv1.VirtualMachine) (vmView, error) {
	strategy, _ := vm.RunStrategy()
	view := vmView{
		key:         client.ObjectKeyFromObject(vm),
		restartable: strategy == kubevirtv1.RunStrategyAlways || strategy == kubevirtv1.RunStrategyRerunOnFailure,
		restart:     recordOf(vm),
		// KubeVirt before v0.59 sets no observedGeneration: its conditions are taken as current.
		observed: vm.Status.ObservedGeneration == 0 || vm.Status.ObservedGeneration >= vm.Generation,
	}
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineRestartRequired && c.Status == corev1.ConditionTrue {
			view.restartRequired = true
		}
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := reader.Get(ctx, view.key, vmi)
	switch {
	case apierrors.IsNotFound(err):
		return view, nil
	case err != nil:
		return view, fmt.Errorf("get VMI %s: %w", view.key, err)
	}
	view.vmiUID = vmi.UID
	view.vmiGoing = !vmi.DeletionTimestamp.IsZero()
	view.vmiReady = !view.vmiGoing && vmi.Status.Phase == kubevirtv1.Running && slices.ContainsFunc(vmi.Status.Conditions, func(c kubevirtv1.VirtualMachineInstanceCondition) bool {
		return c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionTrue
	})
	return view, nil
}

func viewOf(views []vmView, key types.NamespacedName) vmView {
	for _, v := range views {
		if v.key == key {
			return v
		}
	}
	return vmView{key: key}
}

// rolloutSpec is the VidraResource's vmRollout with the API's defaults filled in.
func rolloutSpec(vr *vidrav1alpha1.VidraResource) vidrav1alpha1.VMRolloutSpec {
	spec := vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutRolling}
	if vr.Spec.VMRollout != nil {
		spec = *vr.Spec.VMRollout
		if spec.Strategy == "" {
			spec.Strategy = vidrav1alpha1.VMRolloutRolling
		}
	}
	return spec
}

// writeStatus applies status.vmRollout and the VMRollout condition with a field manager
// of their own, so the VidraResource controller's status writes and these never undo
// each other.
func (r *Reconciler) writeStatus(ctx context.Context, vr *vidrav1alpha1.VidraResource, p plan, spec vidrav1alpha1.VMRolloutSpec, actErr error) error {
	cond := rolloutCondition(p, spec, actErr)
	conditions := slices.Clone(vr.Status.Conditions)
	cond.ObservedGeneration = vr.Generation
	meta.SetStatusCondition(&conditions, cond) // keeps lastTransitionTime when the status holds
	applied := meta.FindStatusCondition(conditions, vidrav1alpha1.ConditionVMRollout)
	if vr.Status.VMRollout != nil && *vr.Status.VMRollout == p.status {
		if cur := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionVMRollout); cur != nil && *cur == *applied {
			return nil
		}
	}
	patch, err := json.Marshal(map[string]any{
		"apiVersion": vidrav1alpha1.GroupVersion.String(),
		"kind":       "VidraResource",
		"metadata":   map[string]any{"name": vr.Name},
		"status":     map[string]any{"vmRollout": p.status, "conditions": []metav1.Condition{*applied}},
	})
	if err != nil {
		return err
	}
	err = r.Hub.Status().Patch(ctx, vr, client.RawPatch(types.ApplyPatchType, patch), client.FieldOwner(fieldManager), client.ForceOwnership)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("write the VM rollout status of %s: %w", vr.Name, err)
	}
	return nil
}

// rolloutCondition says where the rollout stands, naming failed VMs and their reasons.
func rolloutCondition(p plan, spec vidrav1alpha1.VMRolloutSpec, actErr error) metav1.Condition {
	c := metav1.Condition{Type: vidrav1alpha1.ConditionVMRollout, Status: metav1.ConditionFalse}
	s := p.status
	switch {
	case len(p.failed) > 0:
		c.Reason, c.Message = vidrav1alpha1.ReasonVMRolloutPaused, "paused, restarting nothing more until these VMs recover or the VidraResource changes: "+strings.Join(p.failed, "; ")
	case actErr != nil:
		c.Reason, c.Message = vidrav1alpha1.ReasonVMRestartFailed, actErr.Error()
	case p.unobserved > 0:
		c.Reason, c.Message = vidrav1alpha1.ReasonProgressing, fmt.Sprintf("waiting for KubeVirt to see the new spec of %d of %d VMs", p.unobserved, s.Total)
	case spec.Strategy == vidrav1alpha1.VMRolloutManual && s.Pending > 0:
		c.Reason, c.Message = vidrav1alpha1.ReasonVMRestartRequired, fmt.Sprintf("%d of %d VMs need a restart (strategy Manual: restart them yourself)", s.Pending, s.Total)
	case p.waiting:
		c.Reason, c.Message = vidrav1alpha1.ReasonProgressing, fmt.Sprintf("%d of %d VMs updated, %d restarting or unavailable, %d waiting for a restart", s.Updated, s.Total, s.Unavailable, s.Pending)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, fmt.Sprintf("%d VMs run their current spec", s.Updated)
	}
	if len(p.held) > 0 {
		c.Message += fmt.Sprintf("; %d VMs need a restart their runStrategy does not allow: %s", len(p.held), strings.Join(p.held, ", "))
	}
	c.Message = conditions.Bounded(c.Message) // it names VMs: a bundle may have thousands
	return c
}

// event records an Event on a VidraResource about one of its VMs, the related object,
// so the events API does not fold the Events of different VMs into one series.
func (r *Reconciler) event(vr *vidrav1alpha1.VidraResource, vm *kubevirtv1.VirtualMachine, eventType, reason, note string) {
	events.NewRecorder(r.Recorder, "VMRollout").Record(vr, vm, eventType, reason, note)
}

// pullCluster says whether the cluster is a pull cluster, which the hub never engages.
func (r *Reconciler) pullCluster(ctx context.Context, name multicluster.ClusterName) bool {
	vc := &vidrav1alpha1.VidraCluster{}
	return r.Hub.Get(ctx, client.ObjectKey{Name: string(name)}, vc) == nil && vc.Status.Mode == vidrav1alpha1.ClusterModePull
}
