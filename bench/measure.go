package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

func (b *bench) measureIdle(ctx context.Context, r *results) error {
	m, err := b.settled(ctx, "idle")
	r.IdleRSSMiB, r.IdleHeapMiB = m.rssMiB, m.heapMiB
	return err
}

// measureEnroll enrolls the members one at a time, then takes the memory each idle
// engaged cluster costs.
func (b *bench) measureEnroll(ctx context.Context, r *results) error {
	before, err := b.settled(ctx, "before-enroll")
	if err != nil {
		return err
	}
	var latencies []time.Duration
	for _, m := range b.members {
		d, err := b.enroll(ctx, m)
		if err != nil {
			return err
		}
		latencies = append(latencies, d)
	}
	r.EnrollP50Ms, r.EnrollP95Ms = percentile(latencies, 50), percentile(latencies, 95)
	after, err := b.settled(ctx, "enrolled")
	if err != nil {
		return err
	}
	n := float64(len(b.members))
	r.EnrolledHeapMiB = after.heapMiB
	r.RSSPerClusterMiB = (after.rssMiB - before.rssMiB) / n
	r.HeapPerClusterMiB = (after.heapMiB - before.heapMiB) / n
	r.GoroutinesPerCluster = (after.goroutines - before.goroutines) / n
	return nil
}

// bundle is a manifest of n ConfigMaps named <prefix>-<i>, in the destination's namespace.
func bundle(prefix string, n int) string { return bundleIn(prefix, "", n) }

// bundleIn is a manifest of n ConfigMaps named <prefix>-<i> in namespace ("": the
// destination's).
func bundleIn(prefix, namespace string, n int) string {
	meta := ""
	if namespace != "" {
		meta = "\n  namespace: " + namespace
	}
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d%s\ndata:\n  k: v\n", prefix, i, meta))
	}
	return strings.Join(docs, "---\n")
}

// deliver creates resources VidraResources of objects ConfigMaps on each member of
// members and waits until all are Ready; it returns how long that took.
func (b *bench) deliver(ctx context.Context, round string, members []*testfleet.Cluster, resources, objects int) (time.Duration, error) {
	start := time.Now()
	var names []string
	for _, m := range members {
		for i := range resources {
			name := fmt.Sprintf("%s-%s-%d", round, m.Name, i)
			vr := &vidrav1alpha1.VidraResource{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: vidrav1alpha1.VidraResourceSpec{
					Destination: vidrav1alpha1.Destination{Cluster: m.Name, Namespace: "bench-" + round, ReconcileOnEvents: true},
					Manifest:    bundle(name, objects),
				},
			}
			if err := b.fleet.Hub.Client.Create(ctx, vr); err != nil {
				return 0, err
			}
			names = append(names, name)
		}
	}
	err := b.waitReady(ctx, names, 10*time.Minute)
	return time.Since(start), err
}

// waitReady waits until every named VidraResource is Ready.
func (b *bench) waitReady(ctx context.Context, names []string, timeout time.Duration) error {
	named := map[string]bool{}
	for _, n := range names {
		named[n] = true
	}
	return b.waitReadyOf(ctx, func(vr *vidrav1alpha1.VidraResource) bool { return named[vr.Name] }, len(named), timeout)
}

// waitReadyCount waits until n VidraResources labeled label are Ready.
func (b *bench) waitReadyCount(ctx context.Context, label string, n int, timeout time.Duration) error {
	return b.waitReadyOf(ctx, func(vr *vidrav1alpha1.VidraResource) bool { _, ok := vr.Labels[label]; return ok }, n, timeout)
}

// waitReadyOf waits until n VidraResources that counts accepts are Ready, watching them:
// a listing of every VidraResource many times a second would load the hub, and the
// machine, that the operator is measured on.
func (b *bench) waitReadyOf(ctx context.Context, counts func(*vidrav1alpha1.VidraResource) bool, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hub, err := client.NewWithWatch(b.fleet.Hub.Config, client.Options{Scheme: b.fleet.Hub.Client.Scheme()})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	note := func(obj runtime.Object) {
		if vr, ok := obj.(*vidrav1alpha1.VidraResource); ok && counts(vr) && conditions.IsReady(vr) {
			ready[vr.Name] = true
		}
	}
	err = watchUntil(ctx, hub, func() client.ObjectList { return &vidrav1alpha1.VidraResourceList{} }, note, func() bool { return len(ready) >= n })
	if err != nil {
		return fmt.Errorf("%d of %d VidraResources Ready: %w", len(ready), n, err)
	}
	return nil
}

// watchUntil lists the objects of newList's kind, then watches them, showing each to
// note, until done says so or ctx ends; a watch the server ends is listed and watched
// again.
func watchUntil(ctx context.Context, hub client.WithWatch, newList func() client.ObjectList, note func(runtime.Object), done func() bool) error {
	for {
		list := newList()
		if err := hub.List(ctx, list); err != nil {
			return err
		}
		if err := apimeta.EachListItem(list, func(obj runtime.Object) error { note(obj); return nil }); err != nil {
			return err
		}
		if done() {
			return nil
		}
		w, err := hub.Watch(ctx, newList(), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			note(ev.Object)
			if done() {
				w.Stop()
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// workload is one delivery measured against the tight-loop limit of the same objects.
type workload struct {
	Name string `json:"name"`
	// Placement is where the processes ran: "shared" or "apart" (see placement.go).
	Placement string `json:"placement"`
	Members   int    `json:"members"`
	Resources int    `json:"resourcesPerMember"`
	Objects   int    `json:"objectsPerResource"`

	// Rounds is how many times the workload, and its limit, were measured.
	Rounds int `json:"rounds"`
	// ObjectsPerSec is the rounds' median rate and Seconds the time it implies;
	// OperatorRates and LimitRates are every round's objects per second.
	Seconds       float64   `json:"convergeSeconds"`
	ObjectsPerSec float64   `json:"convergeObjectsPerSecond"`
	OperatorRates []float64 `json:"operatorObjectsPerSecondByRound"`
	LimitRates    []float64 `json:"limitObjectsPerSecondByRound"`
	// SpreadLimitRates are, with several members, the same tight loop spread over every
	// member at once, as the operator's own applies are: what this one machine allows
	// when all the control planes work together. Shown beside the limit, not a target.
	SpreadLimitRates         []float64 `json:"spreadLimitObjectsPerSecondByRound,omitempty"`
	SpreadLimitObjectsPerSec float64   `json:"spreadLimitObjectsPerSecond,omitempty"`
	OperatorToSpreadLimit    float64   `json:"operatorToSpreadLimit,omitempty"`
	// MemberRequestsPerObject counts every request to the members (reads, writes,
	// discovery, watches) per object delivered; 1.0 is one apply each.
	MemberRequestsPerObject float64 `json:"memberRequestsPerObject"`
	// MemberRequests breaks them down by method, per object.
	MemberRequests string `json:"memberRequestsPerObjectByMethod"`
	// HubWritesPerResource counts the writes the hub served on VidraResources,
	// ControllerRevisions and Events.
	HubWritesPerResource float64 `json:"hubWritesPerResource"`
	// HubWrites breaks them down by verb and resource, per VidraResource.
	HubWrites         string  `json:"hubWritesPerResourceByKind"`
	CPUSecondsPer1000 float64 `json:"operatorCPUSecondsPer1000Objects"`
	// The CPU the control planes spent meanwhile, per 1000 objects: the members' API
	// servers and etcds, and the hub's (its writes, and the bench's own watch of it).
	MembersCPUSecondsPer1000 float64 `json:"membersCPUSecondsPer1000Objects"`
	HubCPUSecondsPer1000     float64 `json:"hubCPUSecondsPer1000Objects"`

	LimitObjectsPerSec            float64 `json:"limitObjectsPerSecond"`
	LimitCPUSecondsPer1000        float64 `json:"limitCPUSecondsPer1000Objects"`
	LimitMembersCPUSecondsPer1000 float64 `json:"limitMembersCPUSecondsPer1000Objects"`
	OperatorToLimit               float64 `json:"operatorToLimit"`
	// The same bundles applied by Flux's engine (fluxPeer) after each round: its rate,
	// every round's, its requests to the members per object, and operator/Flux, the
	// median of the rounds' ratios.
	FluxObjectsPerSec           float64   `json:"fluxObjectsPerSecond"`
	FluxRates                   []float64 `json:"fluxObjectsPerSecondByRound"`
	FluxMemberRequestsPerObject float64   `json:"fluxMemberRequestsPerObject"`
	OperatorToFlux              float64   `json:"operatorToFlux"`
	// The CPU Flux's engine (the bench process) and the members' control planes spent
	// meanwhile, per 1000 objects: beside the operator's pipeline's, it says whether a
	// ratio follows the work each does or something else (a client-side limit).
	FluxCPUSecondsPer1000        float64 `json:"fluxCPUSecondsPer1000Objects"`
	FluxMembersCPUSecondsPer1000 float64 `json:"fluxMembersCPUSecondsPer1000Objects"`
}

// measureWorkload delivers the workload through the operator, counting what it cost,
// then applies as many objects in a tight loop; Rounds times each, alternating, since one
// run on a shared machine varies by ±20%. The rates are the rounds' medians, operator/limit
// the median of the rounds' ratios; requests, writes and CPU are counted over every round.
func (b *bench) measureWorkload(ctx context.Context, w *workload, members []*testfleet.Cluster) (err error) {
	if w.Placement == placementApart {
		if err := b.place(members, false); err != nil {
			return err
		}
		defer func() {
			if placeErr := b.place(members, true); placeErr != nil && err == nil {
				err = placeErr
			}
		}()
	}
	var delivered, limits, spread, fluxRates []float64
	var fluxRequestsPerObject float64
	var delta counters
	writes := tally{}
	var membersCPU, hubCPU, limitCPU, limitMembersCPU, fluxCPU, fluxMembersCPU float64
	perRound := float64(len(members) * w.Resources * w.Objects)
	for round := range b.Rounds {
		name := w.Name
		if round > 0 {
			name = fmt.Sprintf("%s-%d", w.Name, round+1)
		}
		before, hubBefore, err := b.snapshot(ctx)
		if err != nil {
			return err
		}
		membersBefore, hubCPUBefore := b.controlPlanesCPU(members)
		if round == 0 {
			b.startProfiles(ctx, w.Name)
		}
		d, err := b.deliver(ctx, name, members, w.Resources, w.Objects)
		if err != nil {
			return err
		}
		if round == 0 {
			b.waitProfiles()
		}
		membersAfter, hubCPUAfter := b.controlPlanesCPU(members)
		after, hubAfter, err := b.snapshot(ctx)
		if err != nil {
			return err
		}
		delta = delta.plus(after.since(before))
		writes = writes.added(hubAfter.since(hubBefore))
		membersCPU += membersAfter - membersBefore
		hubCPU += hubCPUAfter - hubCPUBefore
		delivered = append(delivered, perRound/d.Seconds())

		membersBefore, _ = b.controlPlanesCPU(members)
		if round == 0 {
			// The same objects applied by the tight loop: its profiles, diffed with the
			// workload's (pprof -diff_base), show what delivery through the operator adds.
			b.startProfiles(ctx, w.Name+"-limit")
		}
		limit, cpu, err := b.limit(ctx, members, w.Resources*w.Objects, false)
		if err != nil {
			return err
		}
		if round == 0 {
			b.waitProfiles()
		}
		membersAfter, _ = b.controlPlanesCPU(members)
		limits = append(limits, limit)
		limitCPU += cpu
		limitMembersCPU += membersAfter - membersBefore
		membersBefore, _ = b.controlPlanesCPU(members)
		cpuBefore := selfCPUSeconds()
		flux, fluxRequests, err := b.fluxPeer(ctx, members, w.Resources, w.Objects)
		if err != nil {
			return err
		}
		fluxCPU += selfCPUSeconds() - cpuBefore
		membersAfter, _ = b.controlPlanesCPU(members)
		fluxMembersCPU += membersAfter - membersBefore
		fluxRates, fluxRequestsPerObject = append(fluxRates, flux), fluxRequestsPerObject+fluxRequests/float64(b.Rounds)
		if len(members) > 1 {
			rate, _, err := b.limit(ctx, members, w.Resources*w.Objects, true)
			if err != nil {
				return err
			}
			spread = append(spread, rate)
		}
	}
	objects := float64(b.Rounds) * perRound
	w.Rounds = b.Rounds
	w.ObjectsPerSec = median(delivered)
	w.Seconds = perRound / w.ObjectsPerSec
	w.MemberRequestsPerObject = delta.to(members, false) / objects
	w.MemberRequests = delta.byMethod(members).per(objects)
	resources := float64(b.Rounds * len(members) * w.Resources)
	w.HubWritesPerResource = writes.total() / resources
	w.HubWrites = writes.per(resources)
	w.CPUSecondsPer1000 = delta.cpuSeconds / objects * 1000
	w.MembersCPUSecondsPer1000 = membersCPU / objects * 1000
	w.HubCPUSecondsPer1000 = hubCPU / objects * 1000
	w.LimitObjectsPerSec = median(limits)
	w.LimitCPUSecondsPer1000 = limitCPU / objects * 1000
	w.LimitMembersCPUSecondsPer1000 = limitMembersCPU / objects * 1000
	// Each round's delivery is compared with the limit measured right after it, on the
	// machine as it was then: the median of those ratios.
	w.OperatorToLimit = median(quotients(delivered, limits))
	w.OperatorRates, w.LimitRates = delivered, limits
	w.FluxRates, w.FluxObjectsPerSec, w.FluxMemberRequestsPerObject = fluxRates, median(fluxRates), fluxRequestsPerObject
	w.OperatorToFlux = median(quotients(delivered, fluxRates))
	w.FluxCPUSecondsPer1000, w.FluxMembersCPUSecondsPer1000 = fluxCPU/objects*1000, fluxMembersCPU/objects*1000
	if len(spread) > 0 {
		w.SpreadLimitRates, w.SpreadLimitObjectsPerSec, w.OperatorToSpreadLimit = spread, median(spread), median(quotients(delivered, spread))
	}
	return nil
}

// quotients divides each of num by the den of the same round.
func quotients(num, den []float64) []float64 {
	q := make([]float64, len(num))
	for i := range num {
		q[i] = num[i] / den[i]
	}
	return q
}

// median of values (not empty).
func median(values []float64) float64 {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// snapshot reads the operator's counters and the hub's writes so far.
func (b *bench) snapshot(ctx context.Context) (counters, tally, error) {
	c, err := b.counters(ctx)
	if err != nil {
		return c, nil, err
	}
	writes, err := b.hubWrites(ctx)
	return c, writes, err
}

// controlPlanesCPU is the CPU time so far of the members' control planes and of the hub's
// (0 when they cannot be read).
func (b *bench) controlPlanesCPU(members []*testfleet.Cluster) (membersCPU, hubCPU float64) {
	membersCPU, _ = controlPlaneCPUSeconds(members)
	hubCPU, _ = controlPlaneCPUSeconds([]*testfleet.Cluster{b.fleet.Hub})
	return membersCPU, hubCPU
}

func (b *bench) measureConverge(ctx context.Context, r *results) error {
	w := workload{Name: "converge", Placement: placementShared, Members: len(b.members), Resources: b.Resources, Objects: b.Objects}
	if err := b.measureWorkload(ctx, &w, b.members); err != nil {
		return err
	}
	r.Workloads = append(r.Workloads, w)
	m, err := b.settled(ctx, "converged")
	if err != nil {
		return err
	}
	r.ConvergedRSSMiB, r.ConvergedHeapMiB = m.rssMiB, m.heapMiB
	// Each member now has two watched kinds (Namespace, ConfigMap) and its objects; the
	// heap they added, per watched kind, bounds what drift watches cost.
	r.HeapPerWatchedKindMiB = (r.ConvergedHeapMiB - r.EnrolledHeapMiB) / float64(2*len(b.members))
	r.ObjectsPerCluster = b.Rounds * b.Resources * b.Objects
	return b.measureApart(ctx, r, w, b.members)
}

// measureApart delivers the workload again, when -apart asks, with the members' control
// planes on CPUs of their own (see placement.go).
func (b *bench) measureApart(ctx context.Context, r *results, w workload, members []*testfleet.Cluster) error {
	if !b.Apart {
		return nil
	}
	if b.cpus == nil {
		fmt.Fprintf(b.log, "  %s apart: skipped: %v\n", w.Name, b.cpusErr)
		return nil
	}
	apart := workload{Name: w.Name + "-apart", Placement: placementApart, Members: w.Members, Resources: w.Resources, Objects: w.Objects}
	if err := b.measureWorkload(ctx, &apart, members); err != nil {
		return err
	}
	r.Workloads = append(r.Workloads, apart)
	return nil
}

// measureBulk delivers many VidraResources of more objects to one member.
func (b *bench) measureBulk(ctx context.Context, r *results) error {
	if b.BulkResources == 0 {
		return nil
	}
	return b.measureOnFirstMember(ctx, r, "bulk", b.BulkResources, b.BulkObjects)
}

// measureBundle delivers one VidraResource of many objects to one member: a large
// bundle, which no other workload's many small ones show.
func (b *bench) measureBundle(ctx context.Context, r *results) error {
	if b.BundleObjects == 0 {
		return nil
	}
	return b.measureOnFirstMember(ctx, r, "bundle", 1, b.BundleObjects)
}

// measureOnFirstMember delivers a workload of resources VidraResources of objects each
// to the first member, shared and (with -apart) apart.
func (b *bench) measureOnFirstMember(ctx context.Context, r *results, name string, resources, objects int) error {
	w := workload{Name: name, Placement: placementShared, Members: 1, Resources: resources, Objects: objects}
	if err := b.measureWorkload(ctx, &w, b.members[:1]); err != nil {
		return err
	}
	r.Workloads = append(r.Workloads, w)
	return b.measureApart(ctx, r, w, b.members[:1])
}

// measureResync counts what the periodic resync of converged, unchanged VidraResources
// costs: writes to the members and to the hub, per reconcile. It runs on an operator
// restarted with -resync, once that one has applied every managed object since its start
// (restartSettled), and puts the operator back to -workload-resync after.
func (b *bench) measureResync(ctx context.Context, r *results) (err error) {
	if err := b.restartSettled(ctx, "vidra-resync", b.Resync); err != nil {
		return err
	}
	defer func() {
		if restartErr := b.restartSettled(ctx, "vidra", b.WorkloadResync); err == nil {
			err = restartErr
		}
	}()
	before, hubBefore, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	// Each VidraResource is requeued one interval after its last reconcile.
	select {
	case <-time.After(b.Resync + 5*time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	after, hubAfter, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	delta := after.since(before)
	r.ResyncReconciles = delta.reconciles
	if delta.reconciles == 0 {
		return fmt.Errorf("no VidraResource was resynced within %v", b.Resync+5*time.Second)
	}
	r.ResyncMemberWritesPerReconcile = delta.to(b.members, true) / delta.reconciles
	written := hubAfter.since(hubBefore)
	r.ResyncHubWritesPerReconcile = written.total() / delta.reconciles
	r.ResyncHubWrites = written.per(delta.reconciles)
	return nil
}

// limit applies n ConfigMaps to each member with server-side apply in a tight loop,
// straight to the members and with the operator's concurrency: what the API servers
// themselves allow. It returns the objects per second and the CPU seconds it took.
// Member after member unless spread: then the applies go to every member in turn.
func (b *bench) limit(ctx context.Context, members []*testfleet.Cluster, n int, spread bool) (perSecond, cpuSeconds float64, err error) {
	type job struct {
		c   client.Client
		obj *unstructured.Unstructured
	}
	clients := make(map[*testfleet.Cluster]client.Client, len(members))
	for _, m := range members {
		if clients[m], err = unthrottled(m, nil); err != nil {
			return 0, 0, err
		}
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range b.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				err := j.c.Patch(ctx, j.obj, client.Apply, client.FieldOwner("bench-limit"), client.ForceOwnership) //nolint:staticcheck // the tight loop mirrors the operator's own apply
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	round := fmt.Sprintf("bench-limit-%d", time.Now().UnixNano())
	for _, m := range members {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": round}}}
		if err := m.Client.Patch(ctx, ns, client.Apply, client.FieldOwner("bench-limit")); err != nil { //nolint:staticcheck // see above
			return 0, 0, err
		}
	}
	start, cpu := time.Now(), selfCPUSeconds()
	// Member after member: each API server in turn has the machine to itself, which is
	// the most the control planes allow, and the limit the targets are measured against.
	// Spread over every member at once, as the operator's workers are, the same applies
	// cost the shared machine more (the spread limit, shown beside it).
	for k := range len(members) * n {
		m, i := members[k/n], k%n
		if spread {
			m, i = members[k%len(members)], k/len(members)
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("limit-%d", i), "namespace": round},
			"data":     map[string]any{"k": "v"},
		}}
		jobs <- job{c: clients[m], obj: obj}
	}
	close(jobs)
	wg.Wait()
	d := time.Since(start)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	return float64(len(members)*n) / d.Seconds(), selfCPUSeconds() - cpu, nil
}

// measureDrift changes converged objects with another field manager and times until
// the operator has set them back.
func (b *bench) measureDrift(ctx context.Context, r *results) error {
	var latencies []time.Duration
	for i := range b.DriftSamples {
		m := b.members[i%len(b.members)]
		name := fmt.Sprintf("converge-%s-%d-%d", m.Name, i%b.Resources, i%b.Objects)
		cm := &corev1.ConfigMap{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: "bench-converge", Name: name}, cm); err != nil {
			return err
		}
		cm.Data["k"] = "edited by hand"
		start := time.Now()
		if err := m.Client.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
			return err
		}
		err := testfleet.WaitFor(ctx, pollEvery, 30*time.Second, "drift on "+name+" repaired", func() (bool, error) {
			got := &corev1.ConfigMap{}
			err := m.Client.Get(ctx, client.ObjectKeyFromObject(cm), got)
			return err == nil && got.Data["k"] == "v", err
		})
		if err != nil {
			return err
		}
		latencies = append(latencies, time.Since(start))
	}
	r.DriftP50Ms, r.DriftP95Ms = percentile(latencies, 50), percentile(latencies, 95)
	return nil
}

// measureIsolation delivers the same amount to every member but the first, once with
// the first member's API server answering and once with it paused; the ratio is how
// much one hung member slows the others. Measured -rounds times, alternating, as the
// workloads are: one pair of one-second deliveries varies by ±20% on a shared machine.
// The times are the medians, the ratio the median of the rounds' ratios.
func (b *bench) measureIsolation(ctx context.Context, r *results) error {
	others := b.members[1:]
	resources := max(b.Resources/2, 1)
	r.IsolationObjectsPerSide = len(others) * resources * b.Objects
	var unpaused, paused []float64
	for round := range b.Rounds {
		a, err := b.deliver(ctx, fmt.Sprintf("isolation-%d-a", round), others, resources, b.Objects)
		if err != nil {
			return err
		}
		if err := b.members[0].Pause(); err != nil {
			return err
		}
		p, err := b.deliver(ctx, fmt.Sprintf("isolation-%d-b", round), others, resources, b.Objects)
		if resumeErr := b.members[0].Resume(); resumeErr != nil && err == nil {
			err = resumeErr
		}
		if err != nil {
			return err
		}
		unpaused, paused = append(unpaused, a.Seconds()), append(paused, p.Seconds())
	}
	r.IsolationUnpausedSeconds, r.IsolationPausedSeconds = median(unpaused), median(paused)
	r.IsolationRatios = quotients(paused, unpaused)
	r.IsolationRatio = median(r.IsolationRatios)
	return nil
}

// measureLeaks engages and disengages the spare member many times, then compares the
// operator's goroutines and heap with before.
func (b *bench) measureLeaks(ctx context.Context, r *results) error {
	before, err := b.settled(ctx, "before-cycles")
	if err != nil {
		return err
	}
	r.GoroutinesBeforeCycles, r.HeapBeforeCyclesMiB = before.goroutines, before.heapMiB
	for range b.Cycles {
		if _, err := b.enroll(ctx, b.spare); err != nil {
			return err
		}
		if err := b.retire(ctx, b.spare); err != nil {
			return err
		}
	}
	after, err := b.settled(ctx, "after-cycles")
	if err != nil {
		return err
	}
	r.GoroutinesAfterCycles, r.HeapAfterCyclesMiB = after.goroutines, after.heapMiB
	idle, err := b.idleHeap(ctx)
	r.HeapAfterCyclesIdleMiB = idle.heapMiB
	return err
}

// idleHeap measures the heap once the transports of the disengaged clusters have been
// let go: their connections' idle timers (90s) hold them until then, so a heap that
// comes back by itself is no leak.
func (b *bench) idleHeap(ctx context.Context) (memory, error) {
	select {
	case <-time.After(100 * time.Second):
	case <-ctx.Done():
		return memory{}, ctx.Err()
	}
	return b.settled(ctx, "after-cycles-idle")
}
