package identity

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig is a kubeconfig of one context that reaches cluster (as the user's own
// kubeconfig describes it: server, CA, TLS server name) with token and nothing else of
// the user's.
func Kubeconfig(name string, cluster *clientcmdapi.Cluster, token string) ([]byte, error) {
	c := clientcmdapi.NewCluster()
	c.Server = cluster.Server
	c.TLSServerName = cluster.TLSServerName
	c.InsecureSkipTLSVerify = cluster.InsecureSkipTLSVerify
	c.CertificateAuthorityData = cluster.CertificateAuthorityData
	c.ProxyURL = cluster.ProxyURL
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = c
	user := clientcmdapi.NewAuthInfo()
	user.Token = token
	cfg.AuthInfos[name] = user
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo = name, name
	cfg.Contexts[name] = ctx
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("serialize kubeconfig: %w", err)
	}
	return data, nil
}

// TokenOf returns the bearer token of a kubeconfig's current context.
func TokenOf(kubeconfig []byte) (string, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", fmt.Errorf("read kubeconfig: %w", err)
	}
	user, err := currentUser(cfg)
	if err != nil {
		return "", err
	}
	if user.Token == "" {
		return "", errors.New("the kubeconfig's user has no token")
	}
	return user.Token, nil
}

// WithToken returns the kubeconfig with its current context's token replaced, and
// everything else as it was.
func WithToken(kubeconfig []byte, token string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig: %w", err)
	}
	user, err := currentUser(cfg)
	if err != nil {
		return nil, err
	}
	user.Token = token
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("serialize kubeconfig: %w", err)
	}
	return data, nil
}

func currentUser(cfg *clientcmdapi.Config) (*clientcmdapi.AuthInfo, error) {
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig's current context %q does not exist", cfg.CurrentContext)
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig's user %q does not exist", ctx.AuthInfo)
	}
	return user, nil
}

// Lifetime is when a token was issued and when it expires, read from its JWT claims. The
// claims are not verified: the member's API server does that on every request, and the
// times only pace renewal and show how long the credentials last.
type Lifetime struct {
	IssuedAt, ExpiresAt time.Time
}

// LifetimeOf reads a ServiceAccount token's iat and exp claims.
func LifetimeOf(token string) (Lifetime, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Lifetime{}, errors.New("the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Lifetime{}, fmt.Errorf("the token's claims: %w", err)
	}
	var claims struct {
		IssuedAt  int64 `json:"iat"`
		ExpiresAt int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Lifetime{}, fmt.Errorf("the token's claims: %w", err)
	}
	if claims.ExpiresAt == 0 || claims.IssuedAt == 0 || claims.ExpiresAt <= claims.IssuedAt {
		return Lifetime{}, errors.New("the token has no expiry")
	}
	return Lifetime{IssuedAt: time.Unix(claims.IssuedAt, 0), ExpiresAt: time.Unix(claims.ExpiresAt, 0)}, nil
}

// RenewAt is when a token of this lifetime should be renewed: after fraction of it.
func (l Lifetime) RenewAt(fraction float64) time.Time {
	return l.IssuedAt.Add(time.Duration(float64(l.ExpiresAt.Sub(l.IssuedAt)) * fraction))
}

// TTL is the token's whole lifetime, which a renewal asks for again.
func (l Lifetime) TTL() time.Duration { return l.ExpiresAt.Sub(l.IssuedAt) }
