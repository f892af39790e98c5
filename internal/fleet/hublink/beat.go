package hublink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/fleet/clusterinfo"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
)

// Heartbeat renews the agent's heartbeat Lease on the hub every Interval, with the
// agent's version and when its token expires, and renews the token past RenewalPoint
// of its lifetime. Its cost on the hub is one write per Interval: the Lease is read only
// when a write finds it changed. The hub being down holds up nothing: the beat fails,
// is logged, and is tried again at the next tick.
type Heartbeat struct {
	Link *Link
	// Hub writes to the hub (no cache).
	Hub      client.Client
	Interval time.Duration
	// Version is the agent's; KubernetesVersion the member's.
	Version           string
	KubernetesVersion string
	// RenewalPoint is the fraction of the token's lifetime after which it is renewed.
	RenewalPoint float64
	// Member, when set, is asked what the member serves, which the heartbeat reports to
	// the hub when it changes (a HelmSync renders for the member from it).
	Member discovery.DiscoveryInterface
	Log    logr.Logger

	lease *coordinationv1.Lease
	// reported is the last capabilities report the hub holds.
	reported string
}

// Start beats until ctx ends.
func (h *Heartbeat) Start(ctx context.Context) error {
	tick := time.NewTicker(h.Interval)
	defer tick.Stop()
	for {
		h.renewTokenIfDue(ctx)
		if err := h.beat(ctx); err != nil {
			h.Log.Info("heartbeat not written", "hubNamespace", h.Link.Namespace, "reason", err.Error())
			if apierrors.IsUnauthorized(err) {
				// The hub refuses the token in use: the Secret may hold a newer one
				// (enrolled again, or kept by another replica of the agent).
				if err := h.Link.reload(ctx); err != nil {
					h.Log.Error(err, "the agent's Secret not read again")
				}
			}
		} else if err := h.reportCapabilities(ctx); err != nil {
			h.Log.Info("what the member serves was not reported", "hubNamespace", h.Link.Namespace, "reason", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (h *Heartbeat) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.Interval)
	defer cancel()
	key := types.NamespacedName{Namespace: h.Link.Namespace, Name: pull.AgentName}
	if h.lease == nil {
		lease := &coordinationv1.Lease{}
		if err := h.Hub.Get(ctx, key, lease); err != nil {
			return fmt.Errorf("read Lease %s: %w", key, err)
		}
		h.lease = lease
	}
	lease := h.lease.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	holder := h.Link.Cluster
	lease.Spec.HolderIdentity, lease.Spec.RenewTime = &holder, &now
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[pull.VersionAnnotation] = h.Version
	if h.KubernetesVersion != "" {
		lease.Annotations[pull.KubernetesVersionAnnotation] = h.KubernetesVersion
	}
	if exp := h.Link.TokenExpiry(); !exp.IsZero() {
		lease.Annotations[pull.TokenExpiresAnnotation] = exp.UTC().Format(time.RFC3339)
	}
	if err := h.Hub.Update(ctx, lease); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			h.lease = nil // read again at the next beat
		}
		return fmt.Errorf("renew Lease %s: %w", key, err)
	}
	h.lease = lease
	return nil
}

// DefaultRenewalPoint is when the agent renews its token on the hub: after a tenth of its
// life. Once a token expires, the hub refuses its renewal too and only enrolling again
// helps, so the agent renews early: an outage of the hub (or of the agent) is survived
// for up to nine tenths of the token's lifetime (enroll --pull asks for 7 days).
const DefaultRenewalPoint = 0.1

// renewTokenIfDue asks the hub for a new token of the agent's ServiceAccount once the
// current one is past the renewal point, uses it at once, and keeps it in the agent's
// Secret, so that an agent restarted later starts with it; a Secret not written is
// written at a later beat.
func (h *Heartbeat) renewTokenIfDue(ctx context.Context) {
	l := h.Link
	l.mu.Lock()
	lifetime, lifeErr, unkept := l.lifetime, l.lifeErr, l.unkept
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, h.Interval)
	defer cancel()
	if lifeErr == nil && !time.Now().Before(lifetime.RenewAt(h.RenewalPoint)) {
		sa := types.NamespacedName{Namespace: l.Namespace, Name: pull.AgentName}
		token, err := identity.RequestToken(ctx, h.Hub, sa, lifetime.TTL())
		if err != nil {
			h.Log.Info("the agent's token on the hub was not renewed", "expiresAt", lifetime.ExpiresAt, "reason", err.Error())
			return
		}
		l.setToken(token.Value)
		l.mu.Lock()
		l.unkept = true
		l.mu.Unlock()
		unkept = true
		h.Log.Info("the agent's token on the hub was renewed", "expiresAt", token.ExpiresAt)
	}
	if unkept {
		if err := l.keepToken(ctx); err != nil {
			h.Log.Error(err, "renewed token not kept in the agent's Secret yet; tried again at the next beat")
		}
	}
}

// reportCapabilities tells the hub what the member serves, when that changed since the
// last report: a write only when an API comes or goes.
func (h *Heartbeat) reportCapabilities(ctx context.Context) error {
	if h.Member == nil {
		return nil
	}
	info, partial, err := clusterinfo.Discover(h.Member)
	if err != nil {
		return err
	}
	if partial && h.reported == "partial" {
		return nil
	}
	apis := strings.Join(info.APIVersions, "\n")
	report := info.KubeVersion + "\n" + apis
	if report == h.reported {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.Interval)
	defer cancel()
	cm := &corev1.ConfigMap{}
	key := types.NamespacedName{Namespace: h.Link.Namespace, Name: pull.CapabilitiesName}
	if err := h.Hub.Get(ctx, key, cm); err != nil {
		return fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	if partial && cm.Data[pull.APIVersionsKey] != "" {
		// An aggregated API down for a while is no API gone: the last report stays, even
		// one an earlier run of the agent made.
		h.reported = "partial"
		return nil
	}
	if cm.Data[pull.KubeVersionKey] != info.KubeVersion || cm.Data[pull.APIVersionsKey] != apis {
		cm.Data = map[string]string{pull.KubeVersionKey: info.KubeVersion, pull.APIVersionsKey: apis}
		if err := h.Hub.Update(ctx, cm); err != nil {
			return fmt.Errorf("update ConfigMap %s: %w", key, err)
		}
	}
	h.reported = report
	return nil
}
