package secret

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// probeLoop probes the cluster's API server every ProbeInterval until ctx ends. After
// UnreachableAfter failures in a row the cluster is Unreachable; the first success makes
// it Engaged again. The cluster stays engaged either way: its caches reconnect by
// themselves, and controllers see errors for it alone.
func (p *Provider) probeLoop(ctx context.Context, ec *engagedCluster) {
	ticker := time.NewTicker(p.opts.ProbeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		p.renewIfDue(ctx, ec)
		if p.heardSinceProbe(ec) {
			continue
		}
		p.metrics.probes.WithLabelValues(string(ec.name)).Inc()
		version, err := ec.probe.ServerVersion()
		if ctx.Err() != nil {
			return
		}
		ec.probedAt = time.Now()
		now := p.opts.Clock.Now()
		ec.mu.Lock()
		before := ec.phase
		ec.lastProbe = metav1.Now()
		if err == nil {
			ec.failures = 0
			ec.version = version.GitVersion
			ec.phase = vidrav1alpha1.ClusterEngaged
		} else {
			ec.failures++
			if ec.failures >= p.opts.UnreachableAfter {
				ec.phase = vidrav1alpha1.ClusterUnreachable
			}
		}
		// The probe needs no credentials (version is public), so an expired token is
		// found by its expiry.
		if ec.creds.expired(now) {
			ec.phase = vidrav1alpha1.ClusterUnreachable
		}
		expires := ec.creds.lifetime.ExpiresAt
		after := ec.phase
		ec.mu.Unlock()

		if before != after {
			p.log.Info("cluster health changed", "cluster", ec.name, "phase", after, "probeError", errString(err))
		}
		p.metrics.ready.WithLabelValues(string(ec.name)).Set(boolGauge(after == vidrav1alpha1.ClusterEngaged))
		p.metrics.lastProbe.WithLabelValues(string(ec.name)).Set(float64(now.Unix()))
		p.showCredentialExpiry(ec, expires, now)
		if err := p.writeEngagedStatus(ctx, ec, nil, errString(err)); err != nil && ctx.Err() == nil {
			p.log.Error(err, "write VidraCluster status", "cluster", ec.name)
		}
	}
}

// heardSinceProbe says whether the engaged cluster's API server answered someone since
// its last probe, within a probe interval: then it is not probed this time, and the
// gauge of its last probe shows when it was heard from. A cluster not Engaged is probed.
func (p *Provider) heardSinceProbe(ec *engagedCluster) bool {
	now := p.opts.Clock.Now()
	ec.mu.Lock()
	engaged := ec.phase == vidrav1alpha1.ClusterEngaged && !ec.creds.expired(now)
	expires := ec.creds.lifetime.ExpiresAt
	ec.mu.Unlock()
	if !engaged || !ec.heard.since(ec.probedAt, p.opts.ProbeInterval) {
		return false
	}
	p.metrics.lastProbe.WithLabelValues(string(ec.name)).Set(float64(ec.heard.at().Unix()))
	p.showCredentialExpiry(ec, expires, now)
	return true
}

// showCredentialExpiry sets the time left on the cluster's token, where it has an expiry.
func (p *Provider) showCredentialExpiry(ec *engagedCluster, expires, now time.Time) {
	if !expires.IsZero() {
		p.metrics.credentialExpiry.WithLabelValues(string(ec.name)).Set(expires.Sub(now).Seconds())
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
