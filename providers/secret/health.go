package secret

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// probeEvery probes the cluster's API server every ProbeInterval until ctx ends, then
// calls done once no probe runs any more. The probes run on a timer: an idle cluster's
// health holds no goroutine between them.
func (p *Provider) probeEvery(ctx context.Context, ec *engagedCluster, done func()) {
	var t struct {
		mu    sync.Mutex
		timer *time.Timer
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timer = time.AfterFunc(p.opts.ProbeInterval, func() {
		// Held while probing: the end waits for a probe under way.
		t.mu.Lock()
		defer t.mu.Unlock()
		if ctx.Err() == nil {
			p.probe(ctx, ec)
		}
		if ctx.Err() != nil {
			done()
			return
		}
		t.timer.Reset(p.opts.ProbeInterval)
	})
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.timer.Stop() {
			done() // else a probe runs, and calls done when it ends
		}
	})
}

// probe probes the cluster's API server, unless it was heard from since the last probe.
// After UnreachableAfter failures in a row the cluster is Unreachable; the first success
// makes it Engaged again. The cluster stays engaged either way: its caches reconnect by
// themselves, and controllers see errors for it alone.
func (p *Provider) probe(ctx context.Context, ec *engagedCluster) {
	p.renewIfDue(ctx, ec)
	if p.heardSinceProbe(ec) {
		return
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
