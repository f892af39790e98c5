package secret

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// A pull cluster is enrolled by a Secret that holds no credential: its agent fetches its
// bundles from the cluster's namespace on the hub and reports there, in a heartbeat
// Lease. The provider never engages it; it shows it as a VidraCluster from the Secret
// and the heartbeat, and tells the agent the hub's ID.

// reconcilePull shows the pull cluster of a Secret, and looks again when its heartbeat
// would be late.
func (p *Provider) reconcilePull(ctx context.Context, secret *corev1.Secret, enr enrollment) (reconcile.Result, error) {
	key := secretKeyOf(secret)
	// A Secret that enrolled the cluster in push mode lets go of that connection.
	p.stopOwned(key, enr.name)
	c := p.pullClaim(key, secret, enr)
	if _, reason, message := p.precedingConflict(key, c); reason != "" {
		return reconcile.Result{}, p.reject(ctx, secret, enr, reason, message, false)
	}
	p.wakeConflicts(ctx, key, c)
	ns := pull.Namespace(enr.name)
	if err := p.publishHubID(ctx, ns); err != nil {
		return reconcile.Result{}, err
	}
	beat, err := p.heartbeat(ctx, ns)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := p.opts.Clock.Now()
	state := p.judgeAgent(ctx, ns, beat, now)
	err = p.writeStatus(ctx, enr.name, key, enr.labels, func(s *vidrav1alpha1.VidraClusterStatus) {
		s.Mode = vidrav1alpha1.ClusterModePull
		s.Phase, s.Message = state.phase, state.message
		s.Server, s.KubernetesVersion, s.LastProbeTime = "", beat.kubernetesVersion, nil
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: state.ready,
			Reason: state.reason, Message: conditions.Bounded(state.message)})
		meta.RemoveStatusCondition(&s.Conditions, vidrav1alpha1.ConditionKubeconfigCurrent)
		s.DeliveryPolicy = policyStatus(enr.policy, enr.policyErr)
		s.Identity = &vidrav1alpha1.ClusterIdentity{Type: vidrav1alpha1.IdentityServiceAccount,
			ServiceAccount: ns + "/" + pull.AgentName, ExpiresAt: beat.tokenExpires}
		s.Agent = &vidrav1alpha1.AgentStatus{Version: beat.version, LastHeartbeat: p.shownHeartbeat(s.Agent, beat.renewed), Namespace: ns, Message: state.agentMessage}
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: state.lookAgain}, nil
}

// pullClaim records the name a pull Secret asks for, so that a push Secret asking for
// the same name conflicts with it as with any Secret.
func (p *Provider) pullClaim(key types.NamespacedName, secret *corev1.Secret, enr enrollment) claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := claim{name: enr.name, hash: "pull", created: secret.CreationTimestamp.Time}
	p.claims[key] = c
	return c
}

// publishHubID writes the hub's ID where the agent reads it, once per process and
// namespace: the agent owns what it applies in the hub's name.
func (p *Provider) publishHubID(ctx context.Context, ns string) error {
	if p.opts.HubID == "" {
		return nil
	}
	if _, done := p.hubIDPublished.Load(ns); done {
		return nil
	}
	cm := &corev1.ConfigMap{}
	err := p.hubReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: pull.HubInfoName}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pull.HubInfoName},
			Data: map[string]string{pull.HubIDKey: p.opts.HubID}}
		err = p.hub.Create(ctx, cm)
		if apierrors.IsNotFound(err) {
			return nil // no namespace yet: enroll creates it, and the Lease's event brings us back
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("tell the agent the hub's ID in %s/%s: %w", ns, pull.HubInfoName, err)
		}
	case err != nil:
		return fmt.Errorf("read %s/%s: %w", ns, pull.HubInfoName, err)
	case cm.Data[pull.HubIDKey] != p.opts.HubID:
		before := cm.DeepCopy()
		cm.Data = map[string]string{pull.HubIDKey: p.opts.HubID}
		if err := p.hub.Patch(ctx, cm, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("tell the agent the hub's ID in %s/%s: %w", ns, pull.HubInfoName, err)
		}
	}
	p.hubIDPublished.Store(ns, true)
	return nil
}

// shownHeartbeat is the last heartbeat the VidraCluster shows: the one seen, but only once
// the one shown is an agent timeout old, so that the operator writes the status once per
// agent timeout, not at each heartbeat (the phase is judged from the heartbeat seen).
func (p *Provider) shownHeartbeat(shown *vidrav1alpha1.AgentStatus, seen *metav1.Time) *metav1.Time {
	if shown == nil || shown.LastHeartbeat == nil || seen == nil || seen.Sub(shown.LastHeartbeat.Time) >= p.opts.AgentTimeout ||
		seen.Before(shown.LastHeartbeat) {
		return seen
	}
	return shown.LastHeartbeat
}

// agentBeat is what the agent's heartbeat Lease says.
type agentBeat struct {
	renewed *metav1.Time
	version string
	// kubernetesVersion is the member's, as its agent reports it.
	kubernetesVersion string
	tokenExpires      *metav1.Time
	// found says the Lease exists: enroll creates it.
	found bool
}

// heartbeat reads the agent's heartbeat Lease.
func (p *Provider) heartbeat(ctx context.Context, ns string) (agentBeat, error) {
	lease := &coordinationv1.Lease{}
	err := p.leases.Get(ctx, client.ObjectKey{Namespace: ns, Name: pull.AgentName}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return agentBeat{}, nil
	case err != nil:
		return agentBeat{}, fmt.Errorf("read the heartbeat of the agent in %s: %w", ns, err)
	}
	beat := agentBeat{found: true, version: bounded(lease.Annotations[pull.VersionAnnotation]),
		kubernetesVersion: bounded(lease.Annotations[pull.KubernetesVersionAnnotation])}
	if lease.Spec.RenewTime != nil {
		// When the hub saw the Lease change, by its own clock: the member's may be off.
		// The first look after the operator started has seen no change: it takes the
		// agent's word (no later than now), lest an agent dead for days pass for alive.
		now := p.opts.Clock.Now()
		seen, ok := p.beatsSeen.Load(ns)
		switch {
		case !ok:
			seen = beatSeen{resourceVersion: lease.ResourceVersion, at: minTime(now, lease.Spec.RenewTime.Time)}
			p.beatsSeen.Store(ns, seen)
		case seen.(beatSeen).resourceVersion != lease.ResourceVersion:
			seen = beatSeen{resourceVersion: lease.ResourceVersion, at: now}
			p.beatsSeen.Store(ns, seen)
		}
		beat.renewed = &metav1.Time{Time: seen.(beatSeen).at}
	}
	if t, err := time.Parse(time.RFC3339, lease.Annotations[pull.TokenExpiresAnnotation]); err == nil {
		beat.tokenExpires = &metav1.Time{Time: t}
	}
	return beat, nil
}

// beatSeen is when the hub last saw an agent's heartbeat Lease change.
type beatSeen struct {
	resourceVersion string
	at              time.Time
}

// bounded is a value the agent reports, cut to what a person reads: the agent is no
// more trusted than its cluster.
func bounded(v string) string {
	const maxLen = 64
	if len(v) > maxLen {
		return v[:maxLen]
	}
	return v
}

// agentState is how a pull cluster stands, judged from its agent's heartbeat.
type agentState struct {
	phase        vidrav1alpha1.ClusterPhase
	ready        metav1.ConditionStatus
	reason       string
	message      string
	agentMessage string
	// lookAgain is when the heartbeat would be late, or 0.
	lookAgain time.Duration
}

// judgeAgent says how the cluster stands: Engaged while its agent reports within the
// agent timeout, Pending until it first does, Unreachable once it is late, with the
// reason the hub can tell (a token that expired, an identity that is gone: then the hub
// refuses the agent, which cannot say so itself).
func (p *Provider) judgeAgent(ctx context.Context, ns string, beat agentBeat, now time.Time) agentState {
	timeout := p.opts.AgentTimeout
	st := agentState{}
	if beat.version != "" && p.opts.Version != "" && beat.version != p.opts.Version {
		st.agentMessage = fmt.Sprintf("the agent runs version %s, the hub %s", beat.version, p.opts.Version)
	}
	switch {
	case !beat.found:
		st.phase, st.ready, st.reason = vidrav1alpha1.ClusterPending, metav1.ConditionFalse, vidrav1alpha1.ReasonAgentPending
		st.message = fmt.Sprintf("no heartbeat Lease %s/%s: enroll the cluster with kubectl vidra enroll --pull, which creates it", ns, pull.AgentName)
	case beat.renewed == nil:
		st.phase, st.ready, st.reason = vidrav1alpha1.ClusterPending, metav1.ConditionFalse, vidrav1alpha1.ReasonAgentPending
		st.message = "waiting for the agent's first heartbeat"
		st.lookAgain = timeout
	case now.Sub(beat.renewed.Time) <= timeout:
		st.phase, st.ready, st.reason = vidrav1alpha1.ClusterEngaged, metav1.ConditionTrue, vidrav1alpha1.ReasonAgentReporting
		st.message = "the agent reports; it applies the cluster's bundles itself"
		st.lookAgain = beat.renewed.Add(timeout).Sub(now) + time.Second
	default:
		st.phase, st.ready = vidrav1alpha1.ClusterUnreachable, metav1.ConditionFalse
		st.reason, st.message = p.whySilent(ctx, ns, beat, now)
	}
	if st.agentMessage != "" {
		st.message += "; " + st.agentMessage
	}
	return st
}

// whySilent says why an agent stopped reporting, as far as the hub can tell.
func (p *Provider) whySilent(ctx context.Context, ns string, beat agentBeat, now time.Time) (string, string) {
	since := fmt.Sprintf("no heartbeat since %s (agent timeout %s)", beat.renewed.UTC().Format(time.RFC3339), p.opts.AgentTimeout)
	sa := &corev1.ServiceAccount{}
	if err := p.hubReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: pull.AgentName}, sa); apierrors.IsNotFound(err) {
		return vidrav1alpha1.ReasonAgentIdentityMissing, fmt.Sprintf("%s: the hub refuses the agent, whose ServiceAccount %s/%s is gone; enroll the cluster again", since, ns, pull.AgentName)
	}
	if beat.tokenExpires != nil && now.After(beat.tokenExpires.Time) {
		return vidrav1alpha1.ReasonAgentTokenExpired, fmt.Sprintf("%s: the hub refuses the agent's token, which expired at %s before it was renewed; enroll the cluster again",
			since, beat.tokenExpires.UTC().Format(time.RFC3339))
	}
	return vidrav1alpha1.ReasonAgentSilent, since + ": the agent is down, or cannot reach the hub; what it delivered stays in place, and it repairs drift on its own"
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
