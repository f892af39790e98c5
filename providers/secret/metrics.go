package secret

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the provider, registered once per Provider.
type metrics struct {
	ready *prometheus.GaugeVec
	// lastProbe is when each engaged cluster was last probed: the VidraCluster's status is
	// written only when a probe changes it, so this is where a probe's freshness shows.
	lastProbe *prometheus.GaugeVec
	// probes counts the probes sent: none while a cluster is heard from otherwise.
	probes   *prometheus.CounterVec
	engaged  prometheus.Counter
	rejected *prometheus.CounterVec
	// credentialExpiry is the time left on a cluster's token, where it has an expiry.
	credentialExpiry *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vidra_cluster_ready",
			Help: "1 when the enrolled cluster is engaged and answers its probes, 0 when engaged but unreachable.",
		}, []string{"cluster"}),
		lastProbe: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vidra_cluster_last_probe_timestamp_seconds",
			Help: "When the engaged cluster's API server last answered a probe, or anyone in its stead (Unix time); a failed probe counts too.",
		}, []string{"cluster"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_cluster_probes_total",
			Help: "Probes sent to the engaged cluster's API server; none is sent while it is heard from otherwise.",
		}, []string{"cluster"}),
		engaged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vidra_cluster_engaged_total",
			Help: "Clusters engaged (first enrollment or kubeconfig rotation).",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_cluster_rejected_total",
			Help: "Enrollment Secrets rejected, by reason.",
		}, []string{"reason"}),
		credentialExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vidra_cluster_credential_expiry_seconds",
			Help: "Seconds until the token the hub uses on the cluster expires (negative once expired); absent for credentials without an expiry.",
		}, []string{"cluster"}),
	}
	for _, c := range []prometheus.Collector{m.ready, m.lastProbe, m.probes, m.engaged, m.rejected, m.credentialExpiry} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register cluster provider metrics: %w", err)
		}
	}
	return m, nil
}
