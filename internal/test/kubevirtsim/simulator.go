package kubevirtsim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// templateHashAnnotation on a VMI records the part of the VM template it was started
// from that only a restart can change.
const templateHashAnnotation = "kubevirtsim.vidra.test/template-hash"

// Actions in the simulator's journal.
const (
	ActionCreated         = "vmi-created"
	ActionReady           = "vmi-ready"
	ActionDeleted         = "vmi-deleted"
	ActionRestartRequired = "restart-required"
	ActionRestartAPI      = "restart-api"
)

// Entry is one thing the simulator did or saw.
type Entry struct {
	Time time.Time
	VM   types.NamespacedName
	// Action is one of the Action constants.
	Action string
	// VMI is the UID of the VMI concerned.
	VMI types.UID
	// VMUID is the UID of the VM, for VMI creations: a VM deleted and made again under
	// the same name is another VM.
	VMUID types.UID
	// Unavailable is how many VMs of the VM's namespace were unavailable right after.
	Unavailable int
}

// Options tune a Simulator.
type Options struct {
	// ReadyAfter is how long a new VMI takes to become Ready (default 300ms).
	ReadyAfter time.Duration
	// Tick is how often the simulator looks at the cluster (default 50ms).
	Tick time.Duration
	// Log receives what the simulator does.
	Log logr.Logger
}

// Simulator plays virt-controller's documented part on one cluster:
//   - a VM whose run strategy is Always (or RerunOnFailure, or running: true) gets a VMI
//     named after it, carrying the template's labels and a controller ownerReference,
//     which becomes Running and Ready after ReadyAfter; a Halted VM's VMI is stopped;
//   - a change of spec.template.spec other than the live-updatable fields (CPU sockets,
//     memory guest, nodeSelector, affinity, tolerations) sets the VM's RestartRequired
//     condition, cleared when a VMI started from the new template runs;
//   - a deleted VMI is recreated from the current template;
//   - the VM's status mirrors its VMI (printableStatus, ready, Ready condition) and
//     observedGeneration says which spec it reflects;
//   - the restart subresource (RestartHandler) deletes the VMI, answering 409 when the
//     VM is not running.
//
// It does not model: migrations, pods, guest agents, volumes, instancetypes and
// preferences, the Once and Manual run strategies' state machines (their VMs are left
// alone), failure reasons, or the time a real guest takes to shut down.
type Simulator struct {
	client client.Client
	opts   Options

	mu          sync.Mutex
	journal     []Entry
	neverReady  map[types.NamespacedName]bool
	created     map[types.UID]time.Time
	unavailable map[string]int // max unavailable per namespace since ResetMaxUnavailable
}

// NewScheme is client-go's scheme with KubeVirt's core v1 types.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build KubeVirt scheme: %w", err)
		}
	}
	return scheme, nil
}

// New returns a simulator of the cluster at cfg.
func New(cfg *rest.Config, opts Options) (*Simulator, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("KubeVirt simulator client: %w", err)
	}
	if opts.ReadyAfter == 0 {
		opts.ReadyAfter = 300 * time.Millisecond
	}
	if opts.Tick == 0 {
		opts.Tick = 50 * time.Millisecond
	}
	return &Simulator{
		client: c, opts: opts, neverReady: map[types.NamespacedName]bool{},
		created: map[types.UID]time.Time{}, unavailable: map[string]int{},
	}, nil
}

// Run simulates until ctx ends.
func (s *Simulator) Run(ctx context.Context) {
	ticker := time.NewTicker(s.opts.Tick)
	defer ticker.Stop()
	for {
		if err := s.tick(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.V(1).Info("simulator tick", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// SetReadyAfter changes how long new VMIs take to become Ready.
func (s *Simulator) SetReadyAfter(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.ReadyAfter = d
}

// SetNeverReady makes the VMIs of a VM never become Ready (or Ready again).
func (s *Simulator) SetNeverReady(vm types.NamespacedName, never bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.neverReady[vm] = never
}

// Journal returns what happened so far.
func (s *Simulator) Journal() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.journal...)
}

// Restarts counts the VMIs replaced for a VM, the latest VM of that name: its restarts.
func (s *Simulator) Restarts(vm types.NamespacedName) int {
	journal := s.Journal()
	var latest types.UID
	for _, e := range journal {
		if e.VM == vm && e.Action == ActionCreated {
			latest = e.VMUID
		}
	}
	created := 0
	for _, e := range journal {
		if e.VM == vm && e.Action == ActionCreated && e.VMUID == latest {
			created++
		}
	}
	return max(created-1, 0)
}

// MaxUnavailable is the most VMs of a namespace that were unavailable (VMI missing or not
// Ready, for VMs that should run) at once since ResetMaxUnavailable.
func (s *Simulator) MaxUnavailable(namespace string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unavailable[namespace]
}

// ResetMaxUnavailable starts measuring MaxUnavailable afresh (after the VMs first
// booted, say).
func (s *Simulator) ResetMaxUnavailable(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unavailable[namespace] = 0
}

func (s *Simulator) record(e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Time = time.Now()
	s.journal = append(s.journal, e)
	s.opts.Log.V(1).Info(e.Action, "vm", e.VM.String(), "vmi", e.VMI)
}

// tick brings every VM and VMI one step towards what KubeVirt would make of them.
func (s *Simulator) tick(ctx context.Context) error {
	var vms kubevirtv1.VirtualMachineList
	if err := s.client.List(ctx, &vms); err != nil {
		return err
	}
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := s.client.List(ctx, &vmis); err != nil {
		return err
	}
	byName := map[types.NamespacedName]*kubevirtv1.VirtualMachineInstance{}
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		byName[client.ObjectKeyFromObject(vmi)] = vmi
	}
	unavailable := map[string]int{}
	seen := map[types.NamespacedName]bool{}
	for i := range vms.Items {
		vm := &vms.Items[i]
		key := client.ObjectKeyFromObject(vm)
		seen[key] = true
		vmi, err := s.step(ctx, vm, byName[key])
		if err != nil {
			return fmt.Errorf("VM %s: %w", key, err)
		}
		if shouldRun(vm) && !ready(vmi) {
			unavailable[vm.Namespace]++
		}
	}
	// A VMI whose VM is gone is stopped.
	for key, vmi := range byName {
		if !seen[key] && vmi.DeletionTimestamp.IsZero() {
			if err := s.deleteVMI(ctx, key, vmi); err != nil {
				return err
			}
		}
	}
	s.mu.Lock()
	for ns, n := range unavailable {
		s.unavailable[ns] = max(s.unavailable[ns], n)
	}
	s.mu.Unlock()
	return nil
}

// step handles one VM and returns its VMI as it is now.
func (s *Simulator) step(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (*kubevirtv1.VirtualMachineInstance, error) {
	key := client.ObjectKeyFromObject(vm)
	strategy, _ := vm.RunStrategy()
	switch {
	case vmi == nil && shouldRun(vm) && vm.Spec.Template != nil:
		created, err := s.createVMI(ctx, vm)
		if err != nil {
			return nil, err
		}
		vmi = created
	case vmi != nil && strategy == kubevirtv1.RunStrategyHalted:
		if err := s.deleteVMI(ctx, key, vmi); err != nil {
			return nil, err
		}
		vmi = nil
	case vmi != nil && !ready(vmi) && s.readyNow(key, vmi):
		vmi.Status.Phase = kubevirtv1.Running
		vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
			Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		}}
		if err := s.client.Update(ctx, vmi); err != nil { // no status subresource on VMIs
			return nil, client.IgnoreNotFound(err)
		}
		s.record(Entry{VM: key, Action: ActionReady, VMI: vmi.UID})
	}
	return vmi, s.updateVMStatus(ctx, vm, vmi)
}

func (s *Simulator) readyNow(vm types.NamespacedName, vmi *kubevirtv1.VirtualMachineInstance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	created, ok := s.created[vmi.UID]
	if !ok {
		created = vmi.CreationTimestamp.Time
	}
	return !s.neverReady[vm] && vmi.DeletionTimestamp.IsZero() && time.Since(created) >= s.opts.ReadyAfter
}

// createVMI starts a VMI from the VM's template, as virt-controller names and labels it.
func (s *Simulator) createVMI(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*kubevirtv1.VirtualMachineInstance, error) {
	hash, err := templateHash(vm)
	if err != nil {
		return nil, err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace,
			Labels:          vm.Spec.Template.ObjectMeta.Labels,
			Annotations:     map[string]string{templateHashAnnotation: hash},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)},
		},
		Spec:   *vm.Spec.Template.Spec.DeepCopy(),
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduling},
	}
	if err := s.client.Create(ctx, vmi); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil
		}
		return nil, err
	}
	s.mu.Lock()
	s.created[vmi.UID] = time.Now()
	s.mu.Unlock()
	s.record(Entry{VM: client.ObjectKeyFromObject(vm), Action: ActionCreated, VMI: vmi.UID, VMUID: vm.UID})
	return vmi, nil
}

func (s *Simulator) deleteVMI(ctx context.Context, vm types.NamespacedName, vmi *kubevirtv1.VirtualMachineInstance) error {
	err := s.client.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return err
	}
	s.record(Entry{VM: vm, Action: ActionDeleted, VMI: vmi.UID})
	return nil
}

// updateVMStatus mirrors the VMI in the VM's status and sets RestartRequired when the
// template changed in a way only a restart applies.
func (s *Simulator) updateVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	status := kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusStopped, ObservedGeneration: vm.Generation}
	restartRequired := false
	if vmi != nil {
		status.Created = true
		status.Ready = ready(vmi)
		status.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
		if status.Ready {
			status.PrintableStatus = kubevirtv1.VirtualMachineStatusRunning
		}
		readyStatus := corev1.ConditionFalse
		if status.Ready {
			readyStatus = corev1.ConditionTrue
		}
		status.Conditions = append(status.Conditions, kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: readyStatus})
		if hash, err := templateHash(vm); err == nil && hash != vmi.Annotations[templateHashAnnotation] {
			restartRequired = true
			status.Conditions = append(status.Conditions, kubevirtv1.VirtualMachineCondition{
				Type: kubevirtv1.VirtualMachineRestartRequired, Status: corev1.ConditionTrue,
				Message: "a non-live-updatable field was changed in the template spec",
			})
		}
	}
	if statusEqual(vm.Status, status) {
		return nil
	}
	wasRequired := hasRestartRequired(vm)
	vm.Status = status
	if err := s.client.Status().Update(ctx, vm); err != nil {
		return client.IgnoreNotFound(ignoreConflict(err))
	}
	if restartRequired && !wasRequired {
		s.record(Entry{VM: client.ObjectKeyFromObject(vm), Action: ActionRestartRequired, VMI: vmi.UID})
	}
	return nil
}

// statusEqual compares what the simulator sets, ignoring condition times.
func statusEqual(a, b kubevirtv1.VirtualMachineStatus) bool {
	if a.Created != b.Created || a.Ready != b.Ready || a.PrintableStatus != b.PrintableStatus || a.ObservedGeneration != b.ObservedGeneration ||
		len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i].Type != b.Conditions[i].Type || a.Conditions[i].Status != b.Conditions[i].Status {
			return false
		}
	}
	return true
}

func hasRestartRequired(vm *kubevirtv1.VirtualMachine) bool {
	for _, c := range vm.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineRestartRequired && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// shouldRun reports whether KubeVirt keeps a VMI running for the VM.
func shouldRun(vm *kubevirtv1.VirtualMachine) bool {
	strategy, err := vm.RunStrategy()
	return err == nil && (strategy == kubevirtv1.RunStrategyAlways || strategy == kubevirtv1.RunStrategyRerunOnFailure)
}

func ready(vmi *kubevirtv1.VirtualMachineInstance) bool {
	if vmi == nil || !vmi.DeletionTimestamp.IsZero() || vmi.Status.Phase != kubevirtv1.Running {
		return false
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// templateHash hashes the VM's template spec without the fields KubeVirt updates live
// (CPU sockets, memory guest, node placement), so only changes needing a restart move it.
func templateHash(vm *kubevirtv1.VirtualMachine) (string, error) {
	if vm.Spec.Template == nil {
		return "", nil
	}
	spec := vm.Spec.Template.Spec.DeepCopy()
	if spec.Domain.CPU != nil {
		spec.Domain.CPU.Sockets = 0
	}
	if spec.Domain.Memory != nil {
		spec.Domain.Memory.Guest = nil
	}
	spec.NodeSelector, spec.Affinity, spec.Tolerations = nil, nil, nil
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}
