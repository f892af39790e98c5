package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/testfleet"
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
	r.RSSPerClusterMiB = (after.rssMiB - before.rssMiB) / n
	r.HeapPerClusterMiB = (after.heapMiB - before.heapMiB) / n
	r.GoroutinesPerCluster = (after.goroutines - before.goroutines) / n
	return nil
}

// bundle is a manifest of n ConfigMaps named <prefix>-<i>.
func bundle(prefix string, n int) string {
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d\ndata:\n  k: v\n", prefix, i))
	}
	return strings.Join(docs, "---\n")
}

// deliver creates resources VidraResources on each member of members and waits until
// all are Ready; it returns how long that took.
func (b *bench) deliver(ctx context.Context, round string, members []*testfleet.Cluster, resources int) (time.Duration, error) {
	start := time.Now()
	var names []string
	for _, m := range members {
		for i := range resources {
			name := fmt.Sprintf("%s-%s-%d", round, m.Name, i)
			vr := &vidrav1alpha1.VidraResource{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: vidrav1alpha1.VidraResourceSpec{
					Destination: vidrav1alpha1.Destination{Cluster: m.Name, Namespace: "bench-" + round, ReconcileOnEvents: true},
					Manifest:    bundle(name, b.Objects),
				},
			}
			if err := b.fleet.Hub.Client.Create(ctx, vr); err != nil {
				return 0, err
			}
			names = append(names, name)
		}
	}
	err := testfleet.WaitFor(ctx, readyPoll, 10*time.Minute, round+" Ready", func() (bool, error) { return b.allReady(ctx, names), nil })
	return time.Since(start), err
}

// readyPoll paces the listing of every VidraResource while a round converges: listing
// them every 10ms took a fifth of the hub's CPU, which the operator measured needs.
const readyPoll = 100 * time.Millisecond

func (b *bench) allReady(ctx context.Context, names []string) bool {
	var list vidrav1alpha1.VidraResourceList
	if err := b.fleet.Hub.Client.List(ctx, &list); err != nil {
		return false
	}
	ready := map[string]bool{}
	for _, vr := range list.Items {
		c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
		ready[vr.Name] = c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation
	}
	for _, n := range names {
		if !ready[n] {
			return false
		}
	}
	return true
}

func (b *bench) measureConverge(ctx context.Context, r *results) error {
	d, err := b.deliver(ctx, "converge", b.members, b.Resources)
	if err != nil {
		return err
	}
	r.ConvergedObjects = len(b.members) * b.Resources * b.Objects
	r.ConvergeSeconds = d.Seconds()
	r.ConvergeObjectsPerSec = float64(r.ConvergedObjects) / d.Seconds()
	m, err := b.settled(ctx, "converged")
	r.ConvergedRSSMiB, r.ConvergedHeapMiB = m.rssMiB, m.heapMiB
	return err
}

// measureLimit applies as many objects as converge did, with server-side apply in a
// tight loop straight to the members and the operator's concurrency: what the API
// servers themselves allow.
func (b *bench) measureLimit(ctx context.Context, r *results) error {
	type job struct {
		c   client.Client
		obj *unstructured.Unstructured
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
	for _, m := range b.members {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "bench-limit"}}}
		if err := m.Client.Patch(ctx, ns, client.Apply, client.FieldOwner("bench-limit")); err != nil { //nolint:staticcheck // see above
			return err
		}
	}
	start := time.Now()
	for _, m := range b.members {
		for i := range b.Resources * b.Objects {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("limit-%d", i), "namespace": "bench-limit"},
				"data":     map[string]any{"k": "v"},
			}}
			jobs <- job{c: m.Client, obj: obj}
		}
	}
	close(jobs)
	wg.Wait()
	d := time.Since(start)
	if firstErr != nil {
		return firstErr
	}
	r.LimitObjectsPerSec = float64(len(b.members)*b.Resources*b.Objects) / d.Seconds()
	r.OperatorToLimit = r.ConvergeObjectsPerSec / r.LimitObjectsPerSec
	return nil
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
// much one hung member slows the others.
func (b *bench) measureIsolation(ctx context.Context, r *results) error {
	others := b.members[1:]
	resources := max(b.Resources/2, 1)
	r.IsolationObjectsPerSide = len(others) * resources * b.Objects
	unpaused, err := b.deliver(ctx, "isolation-a", others, resources)
	if err != nil {
		return err
	}
	if err := b.members[0].Pause(); err != nil {
		return err
	}
	paused, err := b.deliver(ctx, "isolation-b", others, resources)
	if resumeErr := b.members[0].Resume(); resumeErr != nil && err == nil {
		err = resumeErr
	}
	if err != nil {
		return err
	}
	r.IsolationUnpausedSeconds, r.IsolationPausedSeconds = unpaused.Seconds(), paused.Seconds()
	r.IsolationRatio = paused.Seconds() / unpaused.Seconds()
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
