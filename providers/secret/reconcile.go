package secret

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
)

// Reconcile brings the cluster of one enrollment Secret in line with the Secret: engage,
// rotate, reject or retire.
func (p *Provider) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := p.waitReady(ctx); err != nil {
		return reconcile.Result{}, err
	}
	key := req.NamespacedName
	secret, err := p.getSecret(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	// Gone, being deleted, or no longer labeled: let the cluster go.
	if secret == nil || !secret.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, p.retire(ctx, key)
	}

	enr, reason, message := readEnrollment(secret)
	// A Secret relabeled to another cluster name lets go of the old one first.
	if old, ok := p.claimOf(key); ok && old.name != enr.name {
		if err := p.retire(ctx, key); err != nil {
			return reconcile.Result{}, err
		}
	}
	if reason == vidrav1alpha1.ReasonProvisioning || reason == vidrav1alpha1.ReasonControlPlaneUnhealthy {
		// Not an error: the inventory enrolls it once it is provisioned, or healthy
		// again (a cluster being deleted is let go).
		p.stopOwned(key, enr.name)
		return reconcile.Result{}, p.writeNotEngagedStatus(ctx, enr.name, key, enr.labels, vidrav1alpha1.ClusterPending, reason, message)
	}
	if reason != "" {
		return reconcile.Result{}, p.reject(ctx, secret, enr, reason, message, enr.name != "")
	}
	if enr.pull {
		return p.reconcilePull(ctx, secret, enr)
	}
	return p.reconcileDirect(ctx, secret, enr)
}

// reconcileDirect engages the cluster of a Secret the hub connects to itself: it claims
// the cluster's name and server, yields to a Secret that claimed them first, and
// engages, rotates or refreshes the cluster.
func (p *Provider) reconcileDirect(ctx context.Context, secret *corev1.Secret, enr enrollment) (reconcile.Result, error) {
	key := secretKeyOf(secret)
	c, cfg, loadErr := p.claimFor(key, secret, enr)
	if other, reason, message := p.precedingConflict(key, c); other != nil {
		return reconcile.Result{}, p.yield(ctx, secret, enr, reason, message)
	}
	p.wakeConflicts(ctx, key, c)

	current := p.engaged(multicluster.ClusterName(enr.name))
	if current != nil && current.secret != key {
		// A later duplicate still holds the name; it steps back when it is reconciled.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if current != nil && p.narrowFirst(current, enr) {
		// The Secret's policy holds from now, whatever becomes of its new connection.
		if err := p.writeEngagedStatus(ctx, current, enr.labels, ""); err != nil {
			return reconcile.Result{}, err
		}
	}
	if loadErr != nil {
		return reconcile.Result{}, p.refuseKubeconfig(ctx, secret, enr, current, loadErr)
	}
	if current != nil && current.hash == enr.hash && slices.Equal(current.namespaces, cacheNamespaces(enr)) {
		return reconcile.Result{}, p.refresh(ctx, current, enr)
	}
	if cfg == nil {
		var err error
		if cfg, err = kubeconfig.Load(enr.kubeconfig, p.opts.Policy); err != nil {
			return reconcile.Result{}, fmt.Errorf("reload kubeconfig of Secret %s: %w", key, err)
		}
	}
	return reconcile.Result{}, p.engage(ctx, secret, enr, cfg, current)
}

// yield steps back for the Secret that claimed the cluster's name or server first.
func (p *Provider) yield(ctx context.Context, secret *corev1.Secret, enr enrollment, reason, message string) error {
	key := secretKeyOf(secret)
	// A rotation onto another Secret's server fails like any broken rotation.
	if cur := p.engaged(multicluster.ClusterName(enr.name)); reason == vidrav1alpha1.ReasonDuplicateServer && cur != nil && cur.secret == key {
		return p.rotationFailed(ctx, secret, cur, enr, message)
	}
	p.stopOwned(key, enr.name)
	// A duplicate name cannot have a VidraCluster of its own: the name is taken.
	return p.reject(ctx, secret, enr, reason, message, reason == vidrav1alpha1.ReasonDuplicateServer)
}

// refuseKubeconfig reports a kubeconfig the policy refuses: a failed rotation when the
// cluster is engaged (it stays on what worked), else a rejected enrollment.
func (p *Provider) refuseKubeconfig(ctx context.Context, secret *corev1.Secret, enr enrollment, current *engagedCluster, loadErr error) error {
	var rejected *kubeconfig.RejectedError
	if !errors.As(loadErr, &rejected) {
		return loadErr
	}
	if current != nil {
		return p.rotationFailed(ctx, secret, current, enr, rejected.Error())
	}
	return p.reject(ctx, secret, enr, string(rejected.Reason), rejected.Message, true)
}

// refresh takes what changed in a Secret whose kubeconfig did not: its labels, policy
// and what its credentials say of themselves.
func (p *Provider) refresh(ctx context.Context, current *engagedCluster, enr enrollment) error {
	current.mu.Lock()
	current.rotationError = ""
	current.policy, current.policyErr = enr.policy, enr.policyErr
	// The same kubeconfig holds the same token: a renewal problem found since stays.
	creds := credentialsOf(enr)
	if creds.problem == "" {
		creds.problem = current.creds.problem
	}
	current.creds = creds
	current.mu.Unlock()
	return p.writeEngagedStatus(ctx, current, enr.labels, "")
}

// narrowFirst gives the engaged cluster its Secret's delivery policy at once, before any
// new connection is built, and says whether it changed: a narrowed policy must not wait
// for a reconnect that may take long or fail. A wider one is safe early too: the member's
// RBAC still refuses what the old identity may not do.
func (p *Provider) narrowFirst(current *engagedCluster, enr enrollment) bool {
	current.mu.Lock()
	defer current.mu.Unlock()
	if current.policyErr == enr.policyErr && reflect.DeepEqual(current.policy, enr.policy) {
		return false
	}
	current.policy, current.policyErr = enr.policy, enr.policyErr
	return true
}

// engage builds the Secret's cluster and engages it; when current is not nil the new
// cluster replaces it, and only once it works.
func (p *Provider) engage(ctx context.Context, secret *corev1.Secret, enr enrollment, cfg *kubeconfig.Config, current *engagedCluster) error {
	key := secretKeyOf(secret)
	name := multicluster.ClusterName(enr.name)
	log := p.log.WithValues("cluster", name, "secret", key)

	creds := credentialsOf(enr)
	if creds.expired(p.opts.Clock.Now()) {
		// Nothing would work with it, and waiting does not help: a person re-enrolls.
		msg := creds.expiredMessage(enr.name)
		if current != nil {
			return p.rotationFailed(ctx, secret, current, enr, msg)
		}
		log.Info("cluster not engaged: its credentials expired", "expiredAt", creds.lifetime.ExpiresAt)
		p.metrics.credentialExpiry.WithLabelValues(enr.name).Set(creds.lifetime.ExpiresAt.Sub(p.opts.Clock.Now()).Seconds())
		p.warn(secret, vidrav1alpha1.ReasonCredentialsExpired, "cluster "+enr.name+": "+msg)
		return p.writeNotEngagedStatus(ctx, enr.name, key, enr.labels, vidrav1alpha1.ClusterUnreachable, vidrav1alpha1.ReasonCredentialsExpired, msg)
	}
	next, err := p.connect(ctx, name, key, enr.hash, cfg, cacheNamespaces(enr))
	if err == nil {
		next.mu.Lock()
		next.policy, next.policyErr = enr.policy, enr.policyErr
		next.creds = creds
		next.mu.Unlock()
		err = p.engageControllers(name, next, current)
	}
	if err != nil {
		if current != nil {
			return errors.Join(p.rotationFailed(ctx, secret, current, enr, err.Error()), err)
		}
		log.Info("cluster not reachable, will retry", "error", err.Error())
		p.warn(secret, vidrav1alpha1.ReasonUnreachable, "cluster "+enr.name+" is not reachable: "+err.Error())
		return errors.Join(p.writeNotEngagedStatus(ctx, enr.name, key, enr.labels, vidrav1alpha1.ClusterUnreachable,
			vidrav1alpha1.ReasonUnreachable, "not engaged yet, retrying: "+err.Error()), err)
	}

	if current != nil {
		current.stop() // after the new one is engaged: make before break
	}
	p.metrics.engaged.Inc()
	p.metrics.ready.WithLabelValues(enr.name).Set(1)
	p.metrics.lastProbe.WithLabelValues(enr.name).Set(float64(next.lastProbe.Unix()))
	action := "engaged"
	if current != nil {
		action = "rotated"
	}
	log.Info("cluster "+action, "server", next.server, "version", next.version)
	p.enrollEvents.Record(secret, nil, corev1.EventTypeNormal, vidrav1alpha1.ReasonEngaged, fmt.Sprintf("cluster %s %s (%s, %s)", enr.name, action, next.server, next.version))
	return p.writeEngagedStatus(ctx, next, enr.labels, "")
}

// engageControllers publishes next as the cluster name and engages the controllers with
// it; when they cannot be, the cluster before (current, or none) is put back.
func (p *Provider) engageControllers(name multicluster.ClusterName, next, current *engagedCluster) error {
	// Published before the controllers are engaged with it, so that what they do on
	// engagement (a re-engaged cluster's drift watches are set up again) finds it.
	p.mu.Lock()
	p.clusters[name] = next
	p.mu.Unlock()
	err := p.aware.Engage(next.ctx, name, next.cluster)
	if err == nil {
		return nil
	}
	p.mu.Lock()
	if current != nil {
		p.clusters[name] = current
	} else {
		delete(p.clusters, name)
	}
	p.mu.Unlock()
	next.stop()
	err = fmt.Errorf("engage controllers: %w", err)
	// Controllers that got as far as the new cluster let go of the old one: they are
	// engaged with it again.
	if current != nil {
		if reErr := p.aware.Engage(current.ctx, name, current.cluster); reErr != nil {
			err = errors.Join(err, fmt.Errorf("engage controllers with the previous kubeconfig again: %w", reErr))
		}
	}
	return err
}

// rotationFailed keeps the engaged cluster and shows why the Secret's new kubeconfig did
// not replace it.
func (p *Provider) rotationFailed(ctx context.Context, secret *corev1.Secret, current *engagedCluster, enr enrollment, why string) error {
	current.mu.Lock()
	current.rotationError = why
	current.mu.Unlock()
	p.log.Info("kubeconfig rotation failed, keeping the engaged one", "cluster", current.name, "secret", current.secret, "reason", why)
	p.warn(secret, vidrav1alpha1.ReasonRotationFailed, "cluster "+enr.name+" keeps its previous kubeconfig: "+why)
	return p.writeEngagedStatus(ctx, current, enr.labels, "")
}

// reject records a refused Secret: a Warning Event, a metric, a log line, and — when the
// cluster has a name of its own — a Rejected VidraCluster.
func (p *Provider) reject(ctx context.Context, secret *corev1.Secret, enr enrollment, reason, message string, showCluster bool) error {
	p.metrics.rejected.WithLabelValues(reason).Inc()
	p.log.Info("enrollment Secret rejected", "secret", secretKeyOf(secret), "cluster", enr.name, "reason", reason, "message", message)
	p.warn(secret, reason, message)
	if !showCluster {
		return nil
	}
	return p.writeNotEngagedStatus(ctx, enr.name, secretKeyOf(secret), enr.labels, vidrav1alpha1.ClusterRejected, reason, message)
}

// retire lets go of everything a Secret enrolled: its cluster is disengaged and its
// VidraCluster deleted; Secrets that lost a conflict to it are looked at again.
func (p *Provider) retire(ctx context.Context, key types.NamespacedName) error {
	p.mu.Lock()
	old, known := p.claims[key]
	delete(p.claims, key)
	p.mu.Unlock()
	if known {
		p.hubIDPublished.Delete(pull.Namespace(old.name))
		p.beatsSeen.Delete(pull.Namespace(old.name))
		p.stopOwned(key, old.name)
		p.metrics.credentialExpiry.DeleteLabelValues(old.name)
		p.wakeConflicts(ctx, key, old)
		p.log.Info("cluster retired", "cluster", old.name, "secret", key)
	}
	return p.deleteStatus(ctx, key)
}

// stopOwned disengages the cluster name if the Secret key engaged it.
func (p *Provider) stopOwned(key types.NamespacedName, name string) {
	p.mu.Lock()
	ec, ok := p.clusters[multicluster.ClusterName(name)]
	if !ok || ec.secret != key {
		p.mu.Unlock()
		return
	}
	delete(p.clusters, ec.name)
	p.mu.Unlock()
	ec.stop()
	p.metrics.ready.DeleteLabelValues(name)
	p.metrics.lastProbe.DeleteLabelValues(name)
	p.metrics.probes.DeleteLabelValues(name)
	p.metrics.credentialExpiry.DeleteLabelValues(name)
}

func (p *Provider) engaged(name multicluster.ClusterName) *engagedCluster {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.clusters[name]
}

// getSecret reads an enrollment Secret from the label-restricted caches; nil means it is
// gone or no longer labeled.
func (p *Provider) getSecret(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	for _, c := range p.secretCaches {
		s := &corev1.Secret{}
		err := c.Get(ctx, key, s)
		if err == nil {
			return s, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get Secret %s: %w", key, err)
		}
	}
	return nil, nil
}

// claimFor records what the Secret asks for. The kubeconfig is parsed only when it
// changed since the last look; cfg is nil when it was not parsed this time.
func (p *Provider) claimFor(key types.NamespacedName, secret *corev1.Secret, enr enrollment) (claim, *kubeconfig.Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.claims[key]; ok && c.name == enr.name && c.hash == enr.hash {
		return c, nil, c.loadErr
	}
	c := claim{name: enr.name, hash: enr.hash, created: secret.CreationTimestamp.Time}
	cfg, err := kubeconfig.Load(enr.kubeconfig, p.opts.Policy)
	if err == nil {
		c.server = cfg.Server
	}
	c.loadErr = err
	p.claims[key] = c
	return c, cfg, err
}

func (p *Provider) claimOf(key types.NamespacedName) (claim, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	c, ok := p.claims[key]
	return c, ok
}

func (p *Provider) hasClaim(key types.NamespacedName) bool {
	_, ok := p.claimOf(key)
	return ok
}

// precedingConflict finds a Secret that claims the same cluster name or the same server
// and comes first, so that this one is refused: the older Secret (then the first by name)
// comes first, except that a rotation never takes a server from the cluster engaged with it.
func (p *Provider) precedingConflict(key types.NamespacedName, c claim) (*types.NamespacedName, string, string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for otherKey, other := range p.claims {
		if otherKey == key {
			continue
		}
		if other.name == c.name && olderClaim(otherKey, other, key, c) {
			return &otherKey, vidrav1alpha1.ReasonDuplicateClusterName,
				fmt.Sprintf("cluster name %q is already enrolled by Secret %s", c.name, otherKey)
		}
		if c.server != "" && other.server == c.server && p.serverFirstLocked(otherKey, other, key, c) {
			return &otherKey, vidrav1alpha1.ReasonDuplicateServer,
				fmt.Sprintf("server %s is already enrolled as cluster %q by Secret %s", c.server, other.name, otherKey)
		}
	}
	return nil, "", ""
}

// serverFirstLocked says whether claim a keeps a server that claim b asks for too. When b
// is a rotation (b's cluster is engaged with another server) and a's cluster is engaged
// with this one, a keeps it whatever the ages. p.mu must be held.
func (p *Provider) serverFirstLocked(aKey types.NamespacedName, a claim, bKey types.NamespacedName, b claim) bool {
	if p.engagedWithLocked(aKey, a.name, a.server) && p.engagedWithLocked(bKey, b.name, "") {
		return true
	}
	return olderClaim(aKey, a, bKey, b)
}

// engagedWithLocked says whether the Secret's cluster is engaged under name and, when
// server is not empty, with that server. p.mu must be held.
func (p *Provider) engagedWithLocked(key types.NamespacedName, name, server string) bool {
	ec, ok := p.clusters[multicluster.ClusterName(name)]
	return ok && ec.secret == key && (server == "" || ec.server == server)
}

// olderClaim orders claims by the Secrets' age, then by their names.
func olderClaim(aKey types.NamespacedName, a claim, bKey types.NamespacedName, b claim) bool {
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	return aKey.String() < bKey.String()
}

// wakeConflicts requeues the Secrets that conflict with c, so that a later duplicate steps
// back, or one that waited for this Secret to go gets its turn.
func (p *Provider) wakeConflicts(ctx context.Context, key types.NamespacedName, c claim) {
	p.mu.RLock()
	var wake []types.NamespacedName
	for otherKey, other := range p.claims {
		if otherKey != key && (other.name == c.name || (c.server != "" && other.server == c.server)) {
			wake = append(wake, otherKey)
		}
	}
	p.mu.RUnlock()
	for _, k := range wake {
		s := &corev1.Secret{}
		s.Namespace, s.Name = k.Namespace, k.Name
		select {
		case p.requeue <- event.TypedGenericEvent[*corev1.Secret]{Object: s}:
		case <-ctx.Done():
			return
		}
	}
}
