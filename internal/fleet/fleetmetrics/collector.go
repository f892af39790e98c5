// Package fleetmetrics exports the state of the hub's Vidra objects as metrics, read from
// the cache at every scrape (as kube-state-metrics does): a series is right after a
// restart, whichever replica reconciles the object, and goes away with its object. The
// dashboards and alerts of the chart are built on them.
package fleetmetrics

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// listTimeout bounds the reads of one scrape; the cache answers from memory.
const listTimeout = 5 * time.Second

// Collector is a prometheus.Collector of the fleet's state.
type Collector struct {
	reader client.Reader
	log    logr.Logger

	resourceReady  *prometheus.Desc
	syncReady      *prometheus.Desc
	rolloutFailed  *prometheus.Desc
	clusterPhase   *prometheus.Desc
	renewalOverdue *prometheus.Desc
	listFailed     *prometheus.Desc

	resourcesOnly bool
}

// ResourcesOnly limits c to VidraResources, for a pull member's agent, which may read
// nothing else on its cluster. Listing a kind it may not read would fail at every
// scrape, and through a cache that has not started yet would add an informer that never
// syncs, and so hold the agent's cache, and every controller, from starting.
func (c *Collector) ResourcesOnly() *Collector {
	c.resourcesOnly = true
	return c
}

// New returns a collector reading VidraResources, the syncs of every kind (InfrahubSync,
// GitSync, OCISync, HelmSync) and VidraClusters through reader.
func New(reader client.Reader, log logr.Logger) *Collector {
	return &Collector{
		reader: reader,
		log:    log,
		resourceReady: prometheus.NewDesc("vidra_resource_ready",
			"1 when the VidraResource is Ready for its current generation, else 0; absent while suspended. sync_kind and sync name the sync that made it, if any.",
			[]string{"vidraresource", "cluster", "sync_kind", "sync"}, nil),
		syncReady: prometheus.NewDesc("vidra_sync_ready",
			"1 when the sync (kind InfrahubSync, GitSync, OCISync or HelmSync) is Ready for its current generation, else 0; absent while suspended.",
			[]string{"kind", "sync"}, nil),
		rolloutFailed: prometheus.NewDesc("vidra_rollout_failed",
			"1 while the sync's progressive rollout is Failed or RolledBack, else 0; absent for syncs without a rollout.",
			[]string{"kind", "sync"}, nil),
		clusterPhase: prometheus.NewDesc("vidra_cluster_phase",
			"1 for the phase the enrolled cluster's VidraCluster shows (Engaged, Unreachable, Rejected), whether or not it was ever engaged.",
			[]string{"cluster", "phase"}, nil),
		renewalOverdue: prometheus.NewDesc("vidra_cluster_credential_renewal_overdue_seconds",
			"Seconds since the token of the cluster's identity was due for renewal (negative until then); only for identities the operator renews.",
			[]string{"cluster"}, nil),
		listFailed: prometheus.NewDesc("vidra_fleet_metrics_list_failed",
			"1 when the last scrape could not read a kind from the cache (its series are missing then), by kind.",
			[]string{"kind"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.resourceReady
	ch <- c.syncReady
	ch <- c.rolloutFailed
	ch <- c.clusterPhase
	ch <- c.renewalOverdue
	ch <- c.listFailed
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	// Read-only: the cache's objects are not copied (bundles can be large).
	list := func(kind string, l client.ObjectList) {
		failed := 0.0
		if err := c.reader.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			c.log.Error(err, "list for metrics", "kind", kind)
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(c.listFailed, prometheus.GaugeValue, failed, kind)
	}
	var resources vidrav1alpha1.VidraResourceList
	list("VidraResource", &resources)
	for i := range resources.Items {
		vr := &resources.Items[i]
		if vr.Spec.Suspend {
			continue // suspended on purpose: neither Ready nor failing
		}
		kind, sync := vidrav1alpha1.SyncOf(vr.Labels)
		ch <- prometheus.MustNewConstMetric(c.resourceReady, prometheus.GaugeValue, ready(vr),
			vr.Name, vr.Status.Cluster, kind.Kind, sync)
	}
	if c.resourcesOnly {
		return
	}
	for _, kind := range vidrav1alpha1.SyncKinds() {
		syncs := kind.NewList()
		list(kind.Kind, syncs)
		for _, sync := range syncs.Syncs() {
			c.collectSync(ch, kind, sync)
		}
	}
	var clusters vidrav1alpha1.VidraClusterList
	list("VidraCluster", &clusters)
	for i := range clusters.Items {
		vc := &clusters.Items[i]
		if vc.Status.Phase != "" {
			ch <- prometheus.MustNewConstMetric(c.clusterPhase, prometheus.GaugeValue, 1, vc.Name, string(vc.Status.Phase))
		}
		if id := vc.Status.Identity; id != nil && id.RenewAt != nil {
			ch <- prometheus.MustNewConstMetric(c.renewalOverdue, prometheus.GaugeValue, time.Since(id.RenewAt.Time).Seconds(), vc.Name)
		}
	}
}

// collectSync sends the series of one sync: whether it is Ready and whether its rollout
// failed.
func (c *Collector) collectSync(ch chan<- prometheus.Metric, kind vidrav1alpha1.SyncKind, sync vidrav1alpha1.Sync) {
	if sync.Suspended() {
		return // suspended on purpose: neither Ready nor failing
	}
	ch <- prometheus.MustNewConstMetric(c.syncReady, prometheus.GaugeValue, ready(sync), kind.Kind, sync.GetName())
	if r := sync.RolloutStatus(); r != nil {
		failed := 0.0
		if r.Phase == vidrav1alpha1.RolloutFailed || r.Phase == vidrav1alpha1.RolloutRolledBack {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(c.rolloutFailed, prometheus.GaugeValue, failed, kind.Kind, sync.GetName())
	}
}

// ready is 1 when the object is Ready for its current generation.
func ready(obj conditions.Object) float64 {
	if conditions.IsReady(obj) {
		return 1
	}
	return 0
}
