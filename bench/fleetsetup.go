package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// fleetCluster is one cluster of the fleet phase: a front of one member's API server.
type fleetCluster struct {
	name   string
	member *testfleet.Cluster
	// addr is the front's "host:port", and kubeconfig the member's with the front as
	// its server.
	addr       string
	kubeconfig []byte
}

// fleetClusterPrefix begins the name of each fleet cluster, its enrollment Secret and
// VidraCluster.
const fleetClusterPrefix = "fleet-"

// fleetLabel marks the fleet phase's enrollment Secrets.
const fleetLabel = "bench.vidra.infrahub.operators.com/fleet"

// setupWorkers is how many requests at once the bench makes to set the fleet up or clear
// it: its own work, not what is measured.
const setupWorkers = 16

// prepare opens the fronts of n clusters (those of a smaller size are kept), spreads them
// over the members round robin and creates each cluster's namespace on its member.
func (f *fleetRun) prepare(ctx context.Context, n int) ([]fleetCluster, error) {
	clusters := make([]fleetCluster, n)
	for i := range n {
		member := f.members[i%len(f.members)]
		if i == len(f.addresses) {
			server, err := url.Parse(member.Config.Host)
			if err != nil {
				return nil, err
			}
			addr, err := f.fronts.open(ctx, i, server.Host)
			if err != nil {
				return nil, err
			}
			f.addresses = append(f.addresses, addr)
		}
		kubeconfig, err := frontKubeconfig(member.Kubeconfig, f.addresses[i])
		if err != nil {
			return nil, err
		}
		clusters[i] = fleetCluster{name: fmt.Sprintf("%s%04d", fleetClusterPrefix, i), member: member, addr: f.addresses[i], kubeconfig: kubeconfig}
	}
	err := forEach(ctx, clusters, func(c fleetCluster) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.name}}
		return client.IgnoreAlreadyExists(c.member.Client.Create(ctx, ns))
	})
	return clusters, err
}

// openCluster opens front i to member and returns the cluster it makes, named name.
func (f *fronts) openCluster(ctx context.Context, member *testfleet.Cluster, i int, name string) (fleetCluster, error) {
	server, err := url.Parse(member.Config.Host)
	if err != nil {
		return fleetCluster{}, fmt.Errorf("the address of %s: %w", member.Name, err)
	}
	addr, err := f.open(ctx, i, server.Host)
	if err != nil {
		return fleetCluster{}, err
	}
	kubeconfig, err := frontKubeconfig(member.Kubeconfig, addr)
	if err != nil {
		return fleetCluster{}, fmt.Errorf("the kubeconfig of front %d: %w", i, err)
	}
	return fleetCluster{name: name, member: member, addr: addr, kubeconfig: kubeconfig}, nil
}

// frontKubeconfig is kubeconfig with its server moved to the front at addr; the API
// server's certificate is still checked, for the name it was issued to.
func frontKubeconfig(kubeconfig []byte, addr string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
		c.TLSServerName = "localhost"
	}
	return clientcmd.Write(*cfg)
}

// bundle is the k-th bundle of the cluster: n ConfigMaps in the cluster's own namespace.
func (c fleetCluster) bundle(k, n int) string {
	return bundleIn(fmt.Sprintf("bundle-%d", k), c.name, n)
}

// enrollAll creates every cluster's enrollment Secret, setupWorkers at a time, and times
// each until its VidraCluster is Engaged, watched.
func (f *fleetRun) enrollAll(ctx context.Context, clusters []fleetCluster, fr *fleetResult) error {
	var mu sync.Mutex
	created := map[string]time.Time{}
	watchCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	engaged := make(chan map[string]time.Time, 1)
	watchErr := make(chan error, 1)
	hub, err := client.NewWithWatch(f.fleet.Hub.Config, client.Options{Scheme: f.fleet.Hub.Client.Scheme()})
	if err != nil {
		return err
	}
	go func() {
		seen, err := watchEngaged(watchCtx, hub, len(clusters))
		engaged <- seen
		watchErr <- err
	}()
	first := time.Now()
	err = forEach(ctx, clusters, func(c fleetCluster) error {
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: c.name, Namespace: namespace,
				Labels:      map[string]string{vidrav1alpha1.ClusterLabel: c.name, fleetLabel: "true"},
				Annotations: map[string]string{vidrav1alpha1.AllowedNamespacesAnnotation: c.name},
			},
			Data: map[string][]byte{vidrav1alpha1.KubeconfigKey: c.kubeconfig},
		}
		start := time.Now()
		if err := f.fleet.Hub.Client.Create(ctx, secret); err != nil {
			return err
		}
		mu.Lock()
		created[c.name] = start
		mu.Unlock()
		return nil
	})
	if err != nil {
		cancel()
		return err
	}
	seen := <-engaged
	if err := <-watchErr; err != nil {
		return err
	}
	fr.EngageP50Ms, fr.EngageP95Ms, fr.EngageTotalSeconds = engageFigures(first, created, seen)
	return nil
}

// engageFigures are the p50 and p95 of each cluster's time from created to seen Engaged,
// in milliseconds, and the seconds from the first created to the last Engaged.
func engageFigures(first time.Time, created, seen map[string]time.Time) (p50Ms, p95Ms, totalSeconds float64) {
	var latencies []time.Duration
	var last time.Time
	for name, at := range seen {
		latencies = append(latencies, at.Sub(created[name]))
		if at.After(last) {
			last = at
		}
	}
	return percentile(latencies, 50), percentile(latencies, 95), last.Sub(first).Seconds()
}

// watchEngaged returns when the fleet phase's n VidraClusters are Engaged, with the time
// each was first seen so.
func watchEngaged(ctx context.Context, hub client.WithWatch, n int) (map[string]time.Time, error) {
	return watchPrefixEngaged(ctx, hub, fleetClusterPrefix, n)
}

// forEach runs do for every item, setupWorkers at a time, and returns the first error.
func forEach[T any](ctx context.Context, items []T, do func(T) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(setupWorkers)
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return do(it) })
	}
	return g.Wait()
}

// clearVidraResources deletes the hub's VidraResources that match opts, finalizers and
// all, and their revisions.
func (f *fleetRun) clearVidraResources(ctx context.Context, opts ...client.ListOption) error {
	hub := f.fleet.Hub.Client
	start := time.Now()
	var vrs vidrav1alpha1.VidraResourceList
	if err := hub.List(ctx, &vrs, opts...); err != nil {
		return err
	}
	if len(vrs.Items) == 0 {
		return nil
	}
	uids := make([]string, 0, len(vrs.Items))
	for _, vr := range vrs.Items {
		uids = append(uids, string(vr.UID))
	}
	err := forEach(ctx, vrs.Items, func(vr vidrav1alpha1.VidraResource) error {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
		if err := client.IgnoreNotFound(hub.Patch(ctx, &vr, patch)); err != nil {
			return err
		}
		return client.IgnoreNotFound(hub.Delete(ctx, &vr))
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(f.log, "    %d VidraResources cleared in %s\n", len(vrs.Items), since(start))
	start = time.Now()
	defer func() { fmt.Fprintf(f.log, "    their revisions cleared in %s\n", since(start)) }()
	return f.clearRevisions(ctx, uids)
}

// clearRevisions deletes the revision history of the VidraResources whose UIDs are given,
// a collection of a hundred VidraResources' at a time rather than a request a revision.
func (f *fleetRun) clearRevisions(ctx context.Context, uids []string) error {
	const perRequest = 100
	var chunks [][]string
	for chunk := range slices.Chunk(uids, perRequest) {
		chunks = append(chunks, chunk)
	}
	return forEach(ctx, chunks, func(of []string) error {
		revisionOf, err := labels.NewRequirement(vidrav1alpha1.RevisionOfLabel, selection.In, of)
		if err != nil {
			return err
		}
		return f.fleet.Hub.Client.DeleteAllOf(ctx, &appsv1.ControllerRevision{}, client.InNamespace(namespace),
			client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*revisionOf)})
	})
}

// fleetCounters are the operator's counters and the hub's writes at one moment.
type fleetCounters struct {
	operator  counters
	hubWrites tally
	// hubLists are the hub's LISTs and WATCHes so far, by anyone (the bench's own too):
	// what each returns grows with the fleet.
	hubLists tally
	// hubCPU and membersCPU are the CPU seconds of the control planes so far.
	hubCPU, membersCPU float64
}

func (f *fleetRun) fleetCounters(ctx context.Context) (fleetCounters, error) {
	c, err := f.counters(ctx)
	if err != nil {
		return fleetCounters{}, err
	}
	// One read of the hub's metrics for both: each read is served by the hub, whose CPU
	// the counters measure.
	requests, err := f.hubRequests(ctx, func(labels map[string]string) bool { return anyWrite(labels) || anyList(labels) })
	if err != nil {
		return fleetCounters{}, err
	}
	w, lists := requests.split(func(what string) bool { verb, _, _ := strings.Cut(what, " "); return isWrite(verb) })
	hubCPU, err := controlPlaneCPUSeconds([]*testfleet.Cluster{f.fleet.Hub})
	if err != nil {
		return fleetCounters{}, err
	}
	membersCPU, err := controlPlaneCPUSeconds(f.members)
	return fleetCounters{operator: c, hubWrites: w, hubLists: lists, hubCPU: hubCPU, membersCPU: membersCPU}, err
}

// cpuSince is the CPU seconds the operator, the hub and the members each used since
// before, divided by per (objects in thousands, or minutes).
func (c fleetCounters) cpuSince(before fleetCounters, per float64) (operator, hub, members float64) {
	return (c.operator.cpuSeconds - before.operator.cpuSeconds) / per, (c.hubCPU - before.hubCPU) / per, (c.membersCPU - before.membersCPU) / per
}

// memberRequests are the operator's requests to the clusters' fronts, by method.
func (c fleetCounters) memberRequests(clusters []fleetCluster) tally {
	sum := tally{}
	for _, fc := range clusters {
		sum = sum.added(c.operator.requests[fc.addr])
	}
	return sum
}
