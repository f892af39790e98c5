// Package hublink is a pull cluster's agent's way to its hub: the Secret on the member in
// which enrollment left the hub's address, CA and the agent's token; the token, renewed
// by the agent before it expires and written back to that Secret; and the heartbeat the
// agent writes on the hub. The agent needs nothing but its own cluster to find its hub.
package hublink

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
)

// Link is the agent's link to its hub.
type Link struct {
	// Cluster is the cluster's name on the hub; Namespace its namespace there.
	Cluster   string
	Namespace string
	// HubID is the hub's ID, once known (ResolveHubID).
	HubID string
	// Delivery is the ServiceAccount the agent applies as.
	Delivery types.NamespacedName
	// Policy is the member's own delivery policy, from the Secret's annotations, which
	// only the member's administrators write: the agent enforces it whatever the hub sends.
	Policy policy.Policy
	// Namespaces, when not nil, are the only namespaces the agent has rights in (as
	// enrolled), where it reads.
	Namespaces []string

	secret types.NamespacedName
	member client.Client
	config *rest.Config

	mu       sync.Mutex
	token    string
	lifetime identity.Lifetime
	lifeErr  error
	// unkept: the token in use is not the one the Secret holds yet.
	unkept bool
	// kept is the token the Secret held when last read or written: a token the Secret
	// holds besides it was written by someone else (enrolling again).
	kept string
}

// Load reads the agent's Secret key from the member (with member, which must read the
// API server, not a cache).
func Load(ctx context.Context, member client.Client, key types.NamespacedName) (*Link, error) {
	s := &corev1.Secret{}
	if err := member.Get(ctx, key, s); err != nil {
		return nil, fmt.Errorf("read the agent's Secret %s (kubectl vidra enroll --pull writes it): %w", key, err)
	}
	cluster := string(s.Data[vidrav1alpha1.AgentSecretClusterKey])
	if cluster == "" {
		return nil, fmt.Errorf("the agent's Secret %s has no %q naming the cluster on the hub", key, vidrav1alpha1.AgentSecretClusterKey)
	}
	data := s.Data[vidrav1alpha1.AgentSecretKubeconfigKey]
	cfg, err := kubeconfig.Load(data, kubeconfig.Policy{})
	if err != nil {
		return nil, fmt.Errorf("the agent's Secret %s: the hub's kubeconfig: %w", key, err)
	}
	token, err := identity.TokenOf(data)
	if err != nil {
		return nil, fmt.Errorf("the agent's Secret %s: the hub's kubeconfig: %w", key, err)
	}
	delivery, err := identity.ParseServiceAccount(string(s.Data[pull.DeliveryAccountKey]))
	if err != nil {
		return nil, fmt.Errorf("the agent's Secret %s: %s: %w", key, pull.DeliveryAccountKey, err)
	}
	pol, err := policy.Parse(s.Annotations)
	if err != nil {
		return nil, fmt.Errorf("the agent's Secret %s: the member's delivery policy: %w", key, err)
	}
	var namespaces []string
	if v, ok := s.Data[pull.NamespacesKey]; ok {
		for _, ns := range strings.Split(string(v), ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				namespaces = append(namespaces, ns)
			}
		}
		if len(namespaces) == 0 {
			return nil, fmt.Errorf("the agent's Secret %s: %s names no namespace", key, pull.NamespacesKey)
		}
	}
	l := &Link{Namespaces: namespaces,
		Cluster: cluster, Namespace: pull.Namespace(cluster), HubID: string(s.Data[pull.SecretHubIDKey]),
		Delivery: delivery, Policy: pol, secret: key, member: member,
	}
	l.setToken(token)
	l.kept = token
	l.config = rest.CopyConfig(cfg.REST)
	// The token is the one the agent renews, not the kubeconfig's first.
	l.config.BearerToken, l.config.BearerTokenFile = "", ""
	l.config.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &bearer{link: l, next: rt} }
	return l, nil
}

// Config is the client configuration of the hub, with the agent's current token.
func (l *Link) Config() *rest.Config { return rest.CopyConfig(l.config) }

// TokenExpiry is when the agent's current token expires; zero when unknown.
func (l *Link) TokenExpiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lifetime.ExpiresAt
}

func (l *Link) setToken(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.token = token
	l.lifetime, l.lifeErr = identity.LifetimeOf(token)
}

func (l *Link) currentToken() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token
}

// bearer sends the agent's current token with every request to the hub.
type bearer struct {
	link *Link
	next http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.link.currentToken())
	return b.next.RoundTrip(req)
}

// ResolveHubID learns the hub's ID when the Secret does not hold it yet: from the hub
// (which must then answer: the agent owns nothing before it knows in whose name), and
// keeps it in the Secret. It retries until ctx ends.
func (l *Link) ResolveHubID(ctx context.Context, hub client.Reader, log logr.Logger) error {
	if l.HubID != "" {
		return nil
	}
	for {
		cm := &corev1.ConfigMap{}
		err := hub.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: pull.HubInfoName}, cm)
		if err == nil && cm.Data[pull.HubIDKey] != "" {
			l.HubID = cm.Data[pull.HubIDKey]
			return l.updateSecret(ctx, func(s *corev1.Secret) { s.Data[pull.SecretHubIDKey] = []byte(l.HubID) })
		}
		if err == nil {
			err = errors.New("the hub has not published its ID yet")
		}
		log.Info("waiting for the hub's ID", "configMap", l.Namespace+"/"+pull.HubInfoName, "reason", err.Error())
		select {
		case <-ctx.Done():
			return fmt.Errorf("learn the hub's ID: %w", ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
}

// updateSecret changes the agent's Secret on the member.
func (l *Link) updateSecret(ctx context.Context, change func(*corev1.Secret)) error {
	s := &corev1.Secret{}
	if err := l.member.Get(ctx, l.secret, s); err != nil {
		return fmt.Errorf("read the agent's Secret %s: %w", l.secret, err)
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	change(s)
	if err := l.member.Update(ctx, s); err != nil {
		return fmt.Errorf("update the agent's Secret %s: %w", l.secret, err)
	}
	return nil
}

// keepToken writes the token in use into the agent's Secret, in the kubeconfig the Secret
// holds now (enrolling again may have changed the hub's address or CA meanwhile): the
// read and the write are one optimistic update. A token in the Secret that the agent
// neither read nor wrote is newer (enrolling again wrote it): it is adopted, not
// overwritten.
func (l *Link) keepToken(ctx context.Context) error {
	l.mu.Lock()
	token, kept := l.token, l.kept
	l.mu.Unlock()
	s, held, err := l.held(ctx)
	if err != nil {
		return err
	}
	if held != kept && held != token {
		l.adopt(held)
		return nil
	}
	kubeconfig, err := identity.WithToken(s.Data[vidrav1alpha1.AgentSecretKubeconfigKey], token)
	if err != nil {
		return fmt.Errorf("the agent's Secret %s: %w", l.secret, err)
	}
	s.Data[vidrav1alpha1.AgentSecretKubeconfigKey] = kubeconfig
	if err := l.member.Update(ctx, s); err != nil {
		return fmt.Errorf("update the agent's Secret %s: %w", l.secret, err)
	}
	l.mu.Lock()
	l.kept = token
	if l.token == token {
		l.unkept = false
	}
	l.mu.Unlock()
	return nil
}

// reload adopts the token the agent's Secret holds when it is not the one in use: the
// hub refused the one in use, and enrolling again may have written a new one.
func (l *Link) reload(ctx context.Context) error {
	_, held, err := l.held(ctx)
	if err != nil {
		return err
	}
	if held != l.currentToken() {
		l.adopt(held)
	}
	return nil
}

// adopt makes a token the Secret holds the one in use.
func (l *Link) adopt(token string) {
	l.setToken(token)
	l.mu.Lock()
	l.kept, l.unkept = token, false
	l.mu.Unlock()
}

// held reads the agent's Secret and the token its kubeconfig holds.
func (l *Link) held(ctx context.Context) (*corev1.Secret, string, error) {
	s := &corev1.Secret{}
	if err := l.member.Get(ctx, l.secret, s); err != nil {
		return nil, "", fmt.Errorf("read the agent's Secret %s: %w", l.secret, err)
	}
	token, err := identity.TokenOf(s.Data[vidrav1alpha1.AgentSecretKubeconfigKey])
	if err != nil {
		return nil, "", fmt.Errorf("the agent's Secret %s: %w", l.secret, err)
	}
	return s, token, nil
}
