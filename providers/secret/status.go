package secret

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// writeEngagedStatus shows an engaged cluster's observed state on its VidraCluster.
// labels, when not nil, replace the VidraCluster's labels. It holds the cluster's lock, so
// a probe and a reconcile never write an older state over a newer one.
//
// lastProbeTime moves only with a change of what the status shows: a probe that finds
// the cluster as it was writes nothing, so an idle fleet costs the hub no writes (as a
// Node's status is written on change, its heartbeat elsewhere).
// vidra_cluster_last_probe_timestamp_seconds says when each cluster was last probed.
func (p *Provider) writeEngagedStatus(ctx context.Context, ec *engagedCluster, labels map[string]string, probeError string) error {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return p.writeStatus(ctx, string(ec.name), ec.secret, labels, func(s *vidrav1alpha1.VidraClusterStatus) {
		was := s.DeepCopy()
		p.showEngaged(s, ec, probeError)
		s.LastProbeTime = was.LastProbeTime
		if s.LastProbeTime == nil || !apiequality.Semantic.DeepEqual(was, s) {
			s.LastProbeTime = &ec.lastProbe
		}
	})
}

// showEngaged sets what the status shows of an engaged cluster, but its lastProbeTime.
func (p *Provider) showEngaged(s *vidrav1alpha1.VidraClusterStatus, ec *engagedCluster, probeError string) {
	s.Mode, s.Agent = vidrav1alpha1.ClusterModePush, nil
	s.Phase = ec.phase
	s.Server = ec.server
	s.KubernetesVersion = ec.version
	ready := metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: vidrav1alpha1.ReasonEngaged,
		Message: "engaged; the API server answers its probes"}
	now := p.opts.Clock.Now()
	switch {
	case ec.creds.expired(now):
		ready.Status, ready.Reason = metav1.ConditionFalse, vidrav1alpha1.ReasonCredentialsExpired
		ready.Message = ec.creds.expiredMessage(string(ec.name))
	case ec.phase == vidrav1alpha1.ClusterUnreachable:
		ready.Status, ready.Reason = metav1.ConditionFalse, vidrav1alpha1.ReasonUnreachable
		ready.Message = fmt.Sprintf("engaged, but %d probes in a row failed; last: %s", ec.failures, probeError)
	}
	ready.Message = conditions.Bounded(ready.Message)
	meta.SetStatusCondition(&s.Conditions, ready)
	current := metav1.Condition{Type: vidrav1alpha1.ConditionKubeconfigCurrent, Status: metav1.ConditionTrue, Reason: vidrav1alpha1.ReasonRotated,
		Message: "the engaged kubeconfig is the Secret's current one"}
	s.Message = ready.Message
	if ec.rotationError != "" {
		current.Status, current.Reason = metav1.ConditionFalse, vidrav1alpha1.ReasonRotationFailed
		current.Message = "the Secret's new kubeconfig was not engaged, the previous one still is: " + ec.rotationError
		s.Message = "kubeconfig rotation failed, still using the previous kubeconfig: " + ec.rotationError
	}
	current.Message = conditions.Bounded(current.Message)
	meta.SetStatusCondition(&s.Conditions, current)
	s.DeliveryPolicy = policyStatus(ec.policy, ec.policyErr)
	s.Identity = ec.creds.status(now, p.opts.TokenRenewalPoint)
}

// policyStatus shows a delivery policy; nil when it allows everything.
func policyStatus(p policy.Policy, parseErr string) *vidrav1alpha1.DeliveryPolicy {
	if parseErr != "" {
		return &vidrav1alpha1.DeliveryPolicy{Error: parseErr + "; nothing is delivered until it is fixed"}
	}
	if !p.Restricts() {
		return nil
	}
	return &vidrav1alpha1.DeliveryPolicy{AllowedNamespaces: p.AllowedNamespaces, AllowedClusterKinds: p.Kinds(), RequireServiceAccount: p.RequireServiceAccount}
}

// writeNotEngagedStatus shows a cluster that is not engaged: Rejected by policy, or
// Unreachable before it could be engaged.
func (p *Provider) writeNotEngagedStatus(ctx context.Context, name string, secret types.NamespacedName, labels map[string]string,
	phase vidrav1alpha1.ClusterPhase, reason, message string) error {
	return p.writeStatus(ctx, name, secret, labels, func(s *vidrav1alpha1.VidraClusterStatus) {
		s.Phase = phase
		s.Message = message
		s.KubernetesVersion = ""
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{
			Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: conditions.Bounded(message),
		})
		meta.RemoveStatusCondition(&s.Conditions, vidrav1alpha1.ConditionKubeconfigCurrent)
	})
}

// writeStatus creates the VidraCluster if needed and patches its labels and status. It
// refuses to touch a VidraCluster that another enrolled Secret shows.
func (p *Provider) writeStatus(ctx context.Context, name string, secret types.NamespacedName, labels map[string]string,
	mutate func(*vidrav1alpha1.VidraClusterStatus)) error {
	if p.opts.Shard != nil && !p.opts.Shard.Owns(ctx, multicluster.ClusterName(name)) {
		return nil // its owner shows it
	}
	vc := &vidrav1alpha1.VidraCluster{}
	err := p.hub.Get(ctx, client.ObjectKey{Name: name}, vc)
	switch {
	case apierrors.IsNotFound(err):
		vc = &vidrav1alpha1.VidraCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		err := p.hub.Create(ctx, vc)
		if apierrors.IsAlreadyExists(err) {
			// The cache lags behind a create of ours; read the object from the API server.
			err = p.hubReader.Get(ctx, client.ObjectKey{Name: name}, vc)
		}
		if err != nil {
			return fmt.Errorf("create VidraCluster %s: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("get VidraCluster %s: %w", name, err)
	default:
		if ref := vc.Status.SecretRef; ref != nil && (ref.Namespace != secret.Namespace || ref.Name != secret.Name) && p.hasClaim(refKey(ref)) {
			return fmt.Errorf("VidraCluster %s shows the cluster of Secret %s/%s", name, ref.Namespace, ref.Name)
		}
		if labels != nil && !maps.Equal(vc.Labels, labels) {
			before := vc.DeepCopy()
			vc.Labels = labels
			if err := p.hub.Patch(ctx, vc, client.MergeFrom(before)); err != nil {
				return fmt.Errorf("label VidraCluster %s: %w", name, err)
			}
		}
	}
	before := vc.DeepCopy()
	vc.Status.SecretRef = &vidrav1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name}
	mutate(&vc.Status)
	if apiequality.Semantic.DeepEqual(before.Status, vc.Status) {
		return nil
	}
	if err := p.hub.Status().Patch(ctx, vc, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("update status of VidraCluster %s: %w", name, err)
	}
	return nil
}

// deleteStatus deletes the VidraClusters that show the Secret's cluster.
func (p *Provider) deleteStatus(ctx context.Context, secret types.NamespacedName) error {
	// Read from the API server: a VidraCluster this provider created a moment ago may not
	// be in the cache yet, and would outlive its Secret.
	var list vidrav1alpha1.VidraClusterList
	if err := p.hubReader.List(ctx, &list); err != nil {
		return fmt.Errorf("list VidraClusters: %w", err)
	}
	for i := range list.Items {
		vc := &list.Items[i]
		if ref := vc.Status.SecretRef; ref == nil || refKey(ref) != secret {
			continue
		}
		err := p.hub.Delete(ctx, vc, client.Preconditions{UID: &vc.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete VidraCluster %s: %w", vc.Name, err)
		}
	}
	return nil
}

func refKey(ref *vidrav1alpha1.SecretReference) types.NamespacedName {
	return types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
}

// warn records a Warning Event on the Secret; note never holds credentials.
func (p *Provider) warn(s *corev1.Secret, reason, note string) {
	p.enrollEvents.Record(s, nil, corev1.EventTypeWarning, reason, note)
}
