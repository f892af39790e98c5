package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// fluxPeer applies a workload's bundles with the engine a user would otherwise run:
// Flux's (fluxcd/pkg/ssa's ResourceManager.ApplyAllStaged), set up as kustomize-controller
// sets it up by default for a Kustomization: its field manager, its two owner labels on
// every object, and fluxConcurrentSSA reads and dry-runs of a bundle at once (its applies
// follow one after another). The same ConfigMaps in bundles of the same size, the
// operator's -workers bundles at once, straight to the members: nothing is written to a
// hub. It returns the objects per second and the requests it made to the members per
// object.
func (b *bench) fluxPeer(ctx context.Context, members []*testfleet.Cluster, bundles, objects int) (perSecond, requestsPerObject float64, err error) {
	var requests atomic.Int64
	round := fmt.Sprintf("bench-flux-%d", time.Now().UnixNano())
	type job struct {
		manager *ssa.ResourceManager
		objects []*unstructured.Unstructured
	}
	var jobs []job
	for _, m := range members {
		manager, err := fluxManager(m, &requests)
		if err != nil {
			return 0, 0, err
		}
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": round}}}
		if err := m.Client.Patch(ctx, ns, client.Apply, client.FieldOwner("bench-flux")); err != nil { //nolint:staticcheck // the namespace is the bench's, not measured
			return 0, 0, err
		}
		for r := range bundles {
			var objs []*unstructured.Unstructured
			for i := range objects {
				objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": fmt.Sprintf("flux-%d-%d", r, i), "namespace": round},
					"data":     map[string]any{"k": "v"},
				}})
			}
			manager.SetOwnerLabels(objs, fmt.Sprintf("flux-%d", r), "flux-system")
			jobs = append(jobs, job{manager, objs})
		}
	}
	requests.Store(0)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.Workers)
	start := time.Now()
	for _, j := range jobs {
		g.Go(func() error {
			if _, err := j.manager.ApplyAllStaged(gctx, j.objects, ssa.DefaultApplyOptions()); err != nil {
				return fmt.Errorf("flux apply: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	total := float64(len(members) * bundles * objects)
	return total / time.Since(start).Seconds(), float64(requests.Load()) / total, nil
}

// fluxManager is a Flux apply engine for the member, its requests counted.
func fluxManager(m *testfleet.Cluster, requests *atomic.Int64) (*ssa.ResourceManager, error) {
	c, err := unthrottled(m, func(rt http.RoundTripper) http.RoundTripper { return countedTransport{rt, requests} })
	if err != nil {
		return nil, err
	}
	manager := ssa.NewResourceManager(c, nil, ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
	manager.SetConcurrency(fluxConcurrentSSA)
	return manager, nil
}

// fluxConcurrentSSA is kustomize-controller's default --concurrent-ssa.
const fluxConcurrentSSA = 4

// unthrottled is a client of the member with no client-side rate limit, as the
// operator's clients of its clusters have by default (--cluster-qps=0). The member's own
// config, envtest's, allows 1,000 requests a second with a burst of 2,000: a pace the
// operator is not held to, and one that held Flux's engine, at 3 requests an object, to
// 384 objects a second on a machine fast enough to go beyond it.
func unthrottled(m *testfleet.Cluster, wrap func(http.RoundTripper) http.RoundTripper) (client.Client, error) {
	cfg := rest.CopyConfig(m.Config)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	return client.New(cfg, client.Options{Scheme: m.Client.Scheme(), Mapper: m.Client.RESTMapper()})
}

// countedTransport counts the requests it carries.
type countedTransport struct {
	http.RoundTripper
	n *atomic.Int64
}

func (t countedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.RoundTripper.RoundTrip(req)
}
