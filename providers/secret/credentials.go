package secret

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
)

// credentials is what the provider knows of the identity an engaged cluster is reached
// with: whose token it is, when the token expires, and why it cannot be renewed.
type credentials struct {
	// serviceAccount is set when enroll created the identity: its token is renewed.
	serviceAccount *types.NamespacedName
	scoped         bool // the Secret names a ServiceAccount, even one that does not parse
	// lifetime of the token; zero when the kubeconfig holds none that says (a client
	// certificate, or a token without an expiry).
	lifetime identity.Lifetime
	// problem says why the token is not renewed.
	problem string
	// failures in a row, and when renewal is tried next after one.
	failures int
	nextTry  time.Time
}

// errRotationPending: the Secret holds another kubeconfig than the engaged one, which is
// being engaged (or failed to be, as KubeconfigCurrent says). It is no renewal failure.
var errRotationPending = errors.New("the Secret's kubeconfig is not the engaged one (see the KubeconfigCurrent condition), so the engaged token is not renewed")

// maxRenewalBackoff bounds the wait between failed renewals.
const maxRenewalBackoff = 5 * time.Minute

// credentialsOf reads an enrollment's identity. The expiry of any token is read, so that
// a token supplied by hand that expires is shown (and its expiry acted on) too.
func credentialsOf(enr enrollment) credentials {
	c := credentials{serviceAccount: enr.serviceAccount, scoped: enr.serviceAccount != nil || enr.saErr != "", problem: enr.saErr}
	token, err := identity.TokenOf(enr.kubeconfig)
	if err == nil {
		c.lifetime, err = identity.LifetimeOf(token)
	}
	if err != nil && c.serviceAccount != nil {
		c.problem = "the token's expiry is unknown, so it is not renewed: " + err.Error()
	}
	return c
}

// expired says whether the token has expired at now.
func (c credentials) expired(now time.Time) bool {
	return !c.lifetime.ExpiresAt.IsZero() && !now.Before(c.lifetime.ExpiresAt)
}

// expiredMessage says what a person must do about expired credentials.
func (c credentials) expiredMessage(name string) string {
	return fmt.Sprintf("credentials expired: re-enroll (kubectl vidra enroll %s); the token expired at %s",
		name, c.lifetime.ExpiresAt.UTC().Format(time.RFC3339))
}

// status shows the identity on the VidraCluster.
func (c credentials) status(now time.Time, renewalPoint float64) *vidrav1alpha1.ClusterIdentity {
	out := &vidrav1alpha1.ClusterIdentity{Type: vidrav1alpha1.IdentityKubeconfig}
	if c.scoped {
		out.Type = vidrav1alpha1.IdentityServiceAccount
	}
	if c.serviceAccount != nil {
		out.ServiceAccount = c.serviceAccount.String()
	}
	if !c.lifetime.ExpiresAt.IsZero() {
		out.ExpiresAt = &metav1.Time{Time: c.lifetime.ExpiresAt}
		if c.serviceAccount != nil {
			out.RenewAt = &metav1.Time{Time: c.lifetime.RenewAt(renewalPoint)}
		}
	}
	switch {
	case c.expired(now):
		out.Message = "the token expired; re-enroll the cluster"
	case c.problem != "" && !c.lifetime.ExpiresAt.IsZero():
		out.Message = fmt.Sprintf("%s; the token expires in %s", c.problem, c.lifetime.ExpiresAt.Sub(now).Round(time.Second))
	case c.problem != "":
		out.Message = c.problem
	case c.serviceAccount == nil && !c.lifetime.ExpiresAt.IsZero():
		out.Message = "the token is not renewed by the operator: enroll with kubectl vidra enroll for a token that is"
	}
	return out
}

// renewIfDue renews the cluster's token once it is past the renewal point, through the
// member's TokenRequest API with the token itself, and writes it to the enrollment
// Secret. The Secret's change engages the new token the way any rotation does, keeping
// the current one until the new one works. Only the cluster's owner renews.
func (p *Provider) renewIfDue(ctx context.Context, ec *engagedCluster) {
	now := p.opts.Clock.Now()
	ec.mu.Lock()
	c := ec.creds
	ec.mu.Unlock()
	if c.serviceAccount == nil || c.lifetime.ExpiresAt.IsZero() || now.Before(c.lifetime.RenewAt(p.opts.TokenRenewalPoint)) || now.Before(c.nextTry) {
		return
	}
	if p.opts.Shard != nil && !p.opts.Shard.Owns(ctx, ec.name) {
		return
	}
	// A member that does not answer holds up neither the probes nor the status.
	renewCtx, cancel := context.WithTimeout(ctx, 2*p.opts.ProbeTimeout)
	secret, err := p.renew(renewCtx, ec, *c.serviceAccount, c.lifetime.TTL())
	cancel()
	ec.mu.Lock()
	before := ec.creds.problem
	ec.creds.problem = ""
	switch {
	case errors.Is(err, errRotationPending):
		ec.creds.problem = err.Error()
	case err != nil:
		ec.creds.problem = "renewal failed: " + err.Error()
		ec.creds.failures++
		backoff := min(p.opts.ProbeInterval<<min(ec.creds.failures-1, 10), maxRenewalBackoff)
		ec.creds.nextTry = now.Add(backoff)
	default:
		ec.creds.failures, ec.creds.nextTry = 0, time.Time{}
	}
	failures := ec.creds.failures
	ec.mu.Unlock()
	if err == nil || errors.Is(err, errRotationPending) || ctx.Err() != nil {
		return
	}
	log := p.log.WithValues("cluster", ec.name, "secret", ec.secret, "expiresAt", c.lifetime.ExpiresAt, "failures", failures, "error", err.Error())
	if failures == 1 {
		log.Info("cluster credentials not renewed")
	} else {
		log.V(1).Info("cluster credentials not renewed")
	}
	if before == "" && secret != nil {
		p.warn(secret, vidrav1alpha1.EventCredentialsRenewalFailed, fmt.Sprintf("cluster %s: the token of %s was not renewed, it expires at %s: %v",
			ec.name, c.serviceAccount, c.lifetime.ExpiresAt.UTC().Format(time.RFC3339), err))
	}
}

// renew requests a new token and writes it into the Secret's kubeconfig. It returns the
// Secret, for Events.
func (p *Provider) renew(ctx context.Context, ec *engagedCluster, sa types.NamespacedName, ttl time.Duration) (*corev1.Secret, error) {
	secret, err := p.getSecret(ctx, ec.secret)
	if err != nil {
		return nil, err
	}
	if secret == nil {
		return nil, errors.New("the enrollment Secret is gone")
	}
	data := secret.Data[vidrav1alpha1.KubeconfigKey]
	if kubeconfigHash(data) != ec.hash {
		return secret, errRotationPending
	}
	token, err := identity.RequestToken(ctx, ec.cluster.GetClient(), sa, ttl)
	if err != nil {
		return secret, err
	}
	renewed, err := identity.WithToken(data, token.Value)
	if err != nil {
		return secret, err
	}
	patched := secret.DeepCopy()
	patched.Data[vidrav1alpha1.KubeconfigKey] = renewed
	// The lock makes a concurrent change of the Secret win: it is engaged, then renewed.
	if err := p.hub.Patch(ctx, patched, client.MergeFromWithOptions(secret, client.MergeFromWithOptimisticLock{})); err != nil {
		return secret, fmt.Errorf("write the renewed token to Secret %s: %w", ec.secret, err)
	}
	p.log.Info("cluster credentials renewed", "cluster", ec.name, "serviceAccount", sa, "expiresAt", token.ExpiresAt)
	p.renewEvents.Record(secret, nil, corev1.EventTypeNormal, vidrav1alpha1.EventCredentialsRenewed, fmt.Sprintf("cluster %s: the token of %s was renewed; it expires at %s",
		ec.name, sa, token.ExpiresAt.UTC().Format(time.RFC3339)))
	return secret, nil
}

// kubeconfigHash identifies a kubeconfig, to notice rotations.
func kubeconfigHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
