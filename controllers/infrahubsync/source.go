package infrahubsync

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// Keys of the Secrets an InfrahubSync refers to.
const (
	tokenKey    = "apiToken"
	usernameKey = "username"
	passwordKey = "password"
	caKey       = "ca.crt"
)

// sourceError is a source that cannot be used as written: only a change of the
// InfrahubSync or of a Secret helps, so it is not retried with backoff.
type sourceError struct{ msg string }

func (e *sourceError) Error() string { return e.msg }

func sourceErrorf(format string, args ...any) error {
	return &sourceError{msg: fmt.Sprintf(format, args...)}
}

// sources builds and keeps one Infrahub client per InfrahubSync, so a client that logged
// in keeps its tokens from one sync to the next. A client is rebuilt when anything it
// was built from changes (URL, credentials, CA bundle).
type sources struct {
	// reader lists the Secrets labeled for a host; only in the gate's namespace.
	reader client.Reader
	// gate reads the Secrets a sync names, for a sync whose requester may use them.
	gate    *credentials.Gate
	timeout time.Duration
	observe func(code string)

	mu      sync.Mutex
	clients map[string]cachedClient // by InfrahubSync name
}

type cachedClient struct {
	fingerprint string
	client      *infrahub.Client
	transport   *http.Transport
}

// clientFor returns the client of an InfrahubSync's source. Its errors are *sourceError
// when the source is unusable as written.
func (s *sources) clientFor(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync) (*infrahub.Client, error) {
	src := ihs.Spec.Source
	u, err := url.Parse(src.InfrahubAPIURL)
	if err != nil || u.Host == "" {
		return nil, sourceErrorf("infrahubAPIURL %q is not a URL with a host", src.InfrahubAPIURL)
	}
	switch {
	case u.Scheme == "http" && !src.InsecureAllowHTTP:
		return nil, sourceErrorf("infrahubAPIURL %s is plain http: credentials and artifacts would cross the network in clear; use https, or set spec.source.insecureAllowHTTP: true", src.InfrahubAPIURL)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, sourceErrorf("infrahubAPIURL %s: want http or https", src.InfrahubAPIURL)
	case u.User != nil:
		return nil, sourceErrorf("infrahubAPIURL must not carry credentials; use spec.source.credentialsSecretRef")
	}
	creds, err := s.credentials(ctx, ihs, u.Hostname())
	if err != nil {
		return nil, err
	}
	var caPEM []byte
	if src.CASecretRef != nil {
		secret, err := s.gate.Get(ctx, useOf(ihs, "spec.source.caSecretRef", *src.CASecretRef))
		if err != nil {
			return nil, err
		}
		if caPEM = secret.Data[caKey]; len(caPEM) == 0 {
			return nil, sourceErrorf("caSecretRef %s/%s has no %s", secret.Namespace, secret.Name, caKey)
		}
	}

	fingerprint := fingerprintOf(src.InfrahubAPIURL, creds.Token, creds.Username, creds.Password, string(caPEM))
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[ihs.Name]; ok {
		if c.fingerprint == fingerprint {
			return c.client, nil
		}
		c.transport.CloseIdleConnections()
	}
	transport, err := newTransport(caPEM)
	if err != nil {
		return nil, sourceErrorf("caSecretRef %s/%s: %v", src.CASecretRef.Namespace, src.CASecretRef.Name, err)
	}
	c, err := infrahub.New(src.InfrahubAPIURL, infrahub.Options{
		HTTPClient: &http.Client{
			Transport: transport,
			Timeout:   s.timeout,
			// A redirect could carry the API token to another host: none is followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Credentials: creds,
		OnResponse:  s.observe,
	})
	if err != nil {
		return nil, sourceErrorf("%v", err)
	}
	if s.clients == nil {
		s.clients = map[string]cachedClient{}
	}
	s.clients[ihs.Name] = cachedClient{fingerprint: fingerprint, client: c, transport: transport}
	return c, nil
}

// forget drops the client of a deleted InfrahubSync.
func (s *sources) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[name]; ok {
		c.transport.CloseIdleConnections()
		delete(s.clients, name)
	}
}

// credentials reads the source's credentials: from credentialsSecretRef, else from the
// one Secret of the operator's namespace labeled infrahub-api-url=<host>, else none. Either
// Secret is used only where the gate admits it for this sync and its URL.
func (s *sources) credentials(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync, host string) (infrahub.Credentials, error) {
	src := ihs.Spec.Source
	var secret *corev1.Secret
	if src.CredentialsSecretRef != nil {
		var err error
		if secret, err = s.gate.Get(ctx, useOf(ihs, "spec.source.credentialsSecretRef", *src.CredentialsSecretRef)); err != nil {
			return infrahub.Credentials{}, err
		}
	} else {
		var err error
		if secret, err = s.labeled(ctx, host); err != nil || secret == nil {
			return infrahub.Credentials{}, err
		}
		use := useOf(ihs, "the Secret labeled "+vidrav1alpha1.InfrahubURLLabel+"="+host, vidrav1alpha1.SecretReference{})
		if err := s.gate.Admit(ctx, use, secret); err != nil {
			return infrahub.Credentials{}, err
		}
	}
	creds := infrahub.Credentials{
		Token: string(secret.Data[tokenKey]), Username: string(secret.Data[usernameKey]), Password: string(secret.Data[passwordKey]),
	}
	if creds.Token == "" && (creds.Username == "" || creds.Password == "") {
		return infrahub.Credentials{}, sourceErrorf("Secret %s/%s has neither %s nor both %s and %s",
			secret.Namespace, secret.Name, tokenKey, usernameKey, passwordKey)
	}
	return creds, nil
}

// labeled finds the one Secret of the operator's namespace labeled for the host; nil when
// there is none, or the operator may not list Secrets (standalone mode reads Infrahub
// anonymously).
func (s *sources) labeled(ctx context.Context, host string) (*corev1.Secret, error) {
	namespace := s.gate.Namespace()
	var list corev1.SecretList
	err := s.reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{vidrav1alpha1.InfrahubURLLabel: host})
	switch {
	case apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list Secrets labeled %s=%s in %s: %w", vidrav1alpha1.InfrahubURLLabel, host, namespace, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return &list.Items[0], nil
	default:
		return nil, sourceErrorf("%d Secrets in %s are labeled %s=%s; keep one, or set credentialsSecretRef",
			len(list.Items), namespace, vidrav1alpha1.InfrahubURLLabel, host)
	}
}

// useOf is the use of a Secret the InfrahubSync names, for its URL.
func useOf(ihs *vidrav1alpha1.InfrahubSync, field string, ref vidrav1alpha1.SecretReference) credentials.Use {
	return credentials.UseOf(ihs, field, ref, ihs.Spec.Source.InfrahubAPIURL)
}

// newTransport is a transport of its own (so its connections close with it) that trusts
// the system's CAs and caPEM.
func newTransport(caPEM []byte) (*http.Transport, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("no PEM certificate in " + caKey)
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	return transport, nil
}

// fingerprintOf hashes what a client is built from, so secrets are compared without
// being kept.
func fingerprintOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
