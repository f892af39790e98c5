package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/capi"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// inventoryNamespace is where the inventory phase's Cluster API Clusters live: the one
// namespace the bench's operator reads Cluster API from.
const inventoryNamespace = "bench-inventory"

// inventoryFlags are the flags the bench's operator runs with, so that the inventory
// phase finds Cluster API read (nothing else is there).
var inventoryFlags = []string{"--cluster-inventory=cluster-api", "--cluster-inventory-namespaces=" + inventoryNamespace}

// inventoryFront offsets the inventory phase's fronts from the fleet phase's addresses.
const inventoryFront = 2000

// inventoryResult is the engagement of clusters from Cluster API: from each Cluster and
// its kubeconfig Secret created (the Cluster Provisioned) to its VidraCluster Engaged,
// through the identity the operator creates on it with the admin kubeconfig.
type inventoryResult struct {
	Clusters           int     `json:"clusters"`
	EngageP50Ms        float64 `json:"engageP50Ms"`
	EngageP95Ms        float64 `json:"engageP95Ms"`
	EngageTotalSeconds float64 `json:"engageTotalSeconds"`
}

// measureInventory creates -inventory-clusters Cluster API Clusters, each a front of a
// member with its admin kubeconfig beside it, times them Engaged, then deletes them and
// waits until every cluster is let go.
func (b *bench) measureInventory(ctx context.Context, r *results) error {
	var fr fronts
	defer func() { _ = fr.close() }()
	hub := b.fleet.Hub.Client
	if err := client.IgnoreAlreadyExists(hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inventoryNamespace}})); err != nil {
		return err
	}
	clusters := make([]fleetCluster, b.InventoryClusters)
	for i := range clusters {
		c, err := fr.openCluster(ctx, b.members[i%len(b.members)], inventoryFront+i, fmt.Sprintf("c%04d", i))
		if err != nil {
			return err
		}
		clusters[i] = c
	}
	watch, err := client.NewWithWatch(b.fleet.Hub.Config, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		return err
	}
	watchCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	engaged, watchErr := make(chan map[string]time.Time, 1), make(chan error, 1)
	go func() {
		seen, err := watchPrefixEngaged(watchCtx, watch, inventoryNamespace+".", len(clusters))
		engaged <- seen
		watchErr <- err
	}()
	var mu sync.Mutex
	created := map[string]time.Time{}
	first := time.Now()
	err = forEach(ctx, clusters, func(c fleetCluster) error {
		start := time.Now()
		obj := capi.Cluster(inventoryNamespace, c.name, map[string]string{"bench": "inventory"}, nil)
		if err := hub.Create(ctx, obj); err != nil {
			return err
		}
		if err := capi.SetPhase(ctx, hub, obj, "Provisioned"); err != nil {
			return err
		}
		if err := hub.Create(ctx, capi.KubeconfigSecret(inventoryNamespace, c.name, c.kubeconfig)); err != nil {
			return err
		}
		mu.Lock()
		created[inventoryNamespace+"."+c.name] = start
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
	res := inventoryResult{Clusters: len(clusters)}
	res.EngageP50Ms, res.EngageP95Ms, res.EngageTotalSeconds = engageFigures(first, created, seen)
	r.Inventory = &res
	return b.clearInventory(ctx)
}

// clearInventory deletes the phase's Clusters and Secrets, and waits until the operator
// has let every cluster go.
func (b *bench) clearInventory(ctx context.Context) error {
	hub := b.fleet.Hub.Client
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(capi.ClusterGVK.GroupVersion().WithKind("ClusterList"))
	if err := hub.List(ctx, list, client.InNamespace(inventoryNamespace)); err != nil {
		return err
	}
	err := forEach(ctx, list.Items, func(m metav1.PartialObjectMetadata) error {
		obj := capi.Cluster(inventoryNamespace, m.Name, nil, nil)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: inventoryNamespace, Name: m.Name + "-kubeconfig"}}
		return errors.Join(client.IgnoreNotFound(hub.Delete(ctx, obj)), client.IgnoreNotFound(hub.Delete(ctx, secret)))
	})
	if err != nil {
		return err
	}
	return testfleet.WaitFor(ctx, pollEvery, 5*time.Minute, "the inventory's clusters let go", func() (bool, error) {
		var vcs vidrav1alpha1.VidraClusterList
		if err := hub.List(ctx, &vcs); err != nil {
			return false, err
		}
		for _, vc := range vcs.Items {
			if strings.HasPrefix(vc.Name, inventoryNamespace+".") {
				return false, nil
			}
		}
		return true, nil
	})
}

// watchPrefixEngaged returns when n VidraClusters named with prefix are Engaged, with the
// time each was first seen so.
func watchPrefixEngaged(ctx context.Context, hub client.WithWatch, prefix string, n int) (map[string]time.Time, error) {
	seen := map[string]time.Time{}
	note := func(obj runtime.Object) {
		vc, ok := obj.(*vidrav1alpha1.VidraCluster)
		if !ok || !strings.HasPrefix(vc.Name, prefix) || vc.Status.Phase != vidrav1alpha1.ClusterEngaged {
			return
		}
		if _, ok := seen[vc.Name]; !ok {
			seen[vc.Name] = time.Now()
		}
	}
	err := watchUntil(ctx, hub, func() client.ObjectList { return &vidrav1alpha1.VidraClusterList{} }, note, func() bool { return len(seen) == n })
	if err != nil {
		return seen, fmt.Errorf("%d of %d clusters Engaged: %w", len(seen), n, err)
	}
	return seen, nil
}

func (i *inventoryResult) targets() []check {
	if i == nil {
		return nil
	}
	return []check{{fmt.Sprintf("inventory: %d Cluster API clusters Engaged, total (s)", i.Clusters), i.EngageTotalSeconds, "<= 60", i.EngageTotalSeconds <= 60}}
}

func (i *inventoryResult) print() string {
	return fmt.Sprintf("Cluster and Secret created -> Engaged p50 %.0f ms, p95 %.0f ms; all %d Engaged %.1f s after the first was created",
		i.EngageP50Ms, i.EngageP95Ms, i.Clusters, i.EngageTotalSeconds)
}
