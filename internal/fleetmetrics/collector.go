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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// listTimeout bounds the reads of one scrape; the cache answers from memory.
const listTimeout = 5 * time.Second

// Collector is a prometheus.Collector of the fleet's state.
type Collector struct {
	reader client.Reader
	log    logr.Logger

	resourceReady *prometheus.Desc
	syncReady     *prometheus.Desc
	rolloutFailed *prometheus.Desc
}

// New returns a collector reading VidraResources and InfrahubSyncs through reader.
func New(reader client.Reader, log logr.Logger) *Collector {
	return &Collector{
		reader: reader,
		log:    log,
		resourceReady: prometheus.NewDesc("vidra_resource_ready",
			"1 when the VidraResource is Ready for its current generation, else 0.",
			[]string{"vidraresource", "cluster", "infrahubsync"}, nil),
		syncReady: prometheus.NewDesc("vidra_sync_ready",
			"1 when the InfrahubSync is Ready for its current generation, else 0.",
			[]string{"infrahubsync"}, nil),
		rolloutFailed: prometheus.NewDesc("vidra_rollout_failed",
			"1 while the InfrahubSync's progressive rollout is Failed or RolledBack, else 0; absent for syncs without a rollout.",
			[]string{"infrahubsync"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.resourceReady
	ch <- c.syncReady
	ch <- c.rolloutFailed
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	var resources vidrav1alpha1.VidraResourceList
	if err := c.reader.List(ctx, &resources); err != nil {
		c.log.Error(err, "list VidraResources for metrics")
	}
	for i := range resources.Items {
		vr := &resources.Items[i]
		ch <- prometheus.MustNewConstMetric(c.resourceReady, prometheus.GaugeValue, ready(vr.Status.Conditions, vr.Generation),
			vr.Name, vr.Status.Cluster, vr.Labels[vidrav1alpha1.InfrahubSyncLabel])
	}
	var syncs vidrav1alpha1.InfrahubSyncList
	if err := c.reader.List(ctx, &syncs); err != nil {
		c.log.Error(err, "list InfrahubSyncs for metrics")
	}
	for i := range syncs.Items {
		ihs := &syncs.Items[i]
		ch <- prometheus.MustNewConstMetric(c.syncReady, prometheus.GaugeValue, ready(ihs.Status.Conditions, ihs.Generation), ihs.Name)
		if r := ihs.Status.Rollout; r != nil {
			failed := 0.0
			if r.Phase == vidrav1alpha1.RolloutFailed || r.Phase == vidrav1alpha1.RolloutRolledBack {
				failed = 1
			}
			ch <- prometheus.MustNewConstMetric(c.rolloutFailed, prometheus.GaugeValue, failed, ihs.Name)
		}
	}
}

// ready is 1 when the Ready condition is True for generation.
func ready(conditions []metav1.Condition, generation int64) float64 {
	c := meta.FindStatusCondition(conditions, vidrav1alpha1.ConditionReady)
	if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation {
		return 1
	}
	return 0
}
