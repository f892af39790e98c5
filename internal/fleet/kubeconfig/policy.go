// Package kubeconfig turns an untrusted kubeconfig (from an enrollment Secret, or a file a
// user is about to put into one) into a client configuration, refusing what would let its
// author run programs or read files on the operator's machine, or turn TLS off, unless the
// operator was told to allow it. Its messages never hold credentials.
package kubeconfig

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Policy says which risky kubeconfig features are allowed.
type Policy struct {
	// AllowExec allows exec credential plugins and auth-provider plugins.
	AllowExec bool
	// ExecAllowlist names the exec plugin commands that may run when AllowExec is set;
	// client-go enforces it too. Empty allows none.
	ExecAllowlist []string
	// AllowInsecureTLS allows insecure-skip-tls-verify and plain http:// servers.
	AllowInsecureTLS bool
}

// Reason is why a kubeconfig was refused; it names a metric label and a condition reason.
type Reason string

// Reasons a kubeconfig is refused: the API's, which a Rejected VidraCluster shows.
const (
	ReasonInvalid          Reason = vidrav1alpha1.ReasonInvalidKubeconfig
	ReasonNoCurrentContext Reason = vidrav1alpha1.ReasonNoCurrentContext
	ReasonUnknownContext   Reason = vidrav1alpha1.ReasonUnknownContext
	ReasonInvalidServer    Reason = vidrav1alpha1.ReasonInvalidServer
	ReasonExecPlugin       Reason = vidrav1alpha1.ReasonExecPluginNotAllowed
	ReasonAuthProvider     Reason = vidrav1alpha1.ReasonAuthProviderNotAllowed
	ReasonFileReference    Reason = vidrav1alpha1.ReasonFileReference
	ReasonInsecureTLS      Reason = vidrav1alpha1.ReasonInsecureTLSNotAllowed
)

// RejectedError is a kubeconfig refused by policy or unusable as written. Message names
// the offending part (a context, cluster or user name, a field) and never a credential.
type RejectedError struct {
	Reason  Reason
	Message string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("kubeconfig rejected (%s): %s", e.Reason, e.Message)
}

func reject(reason Reason, format string, args ...any) *RejectedError {
	return &RejectedError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Config is a kubeconfig accepted by a Policy.
type Config struct {
	// REST is the client configuration of the current context.
	REST *rest.Config
	// Context is the name of the current context.
	Context string
	// Server is the API server URL of the current context, normalised (see NormalizeServer).
	Server string
}

// Load parses kubeconfig bytes and applies the policy to every cluster and user in them,
// then builds the client configuration of the current context.
func Load(data []byte, policy Policy) (*Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, reject(ReasonInvalid, "does not parse: %s", sanitizeParseError(err))
	}
	return FromAPIConfig(raw, policy)
}

// FromAPIConfig applies the policy to a parsed kubeconfig and builds the client
// configuration of its current context.
func FromAPIConfig(raw *clientcmdapi.Config, policy Policy) (*Config, error) {
	if err := Check(raw, policy); err != nil {
		return nil, err
	}
	if policy.AllowExec {
		restrictExec(raw, policy.ExecAllowlist)
	}
	ctx := raw.Contexts[raw.CurrentContext]
	server, err := NormalizeServer(raw.Clusters[ctx.Cluster].Server)
	if err != nil {
		return nil, reject(ReasonInvalidServer, "cluster %q: %v", ctx.Cluster, err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, reject(ReasonInvalid, "context %q: %s", raw.CurrentContext, redact(err.Error(), raw))
	}
	return &Config{REST: cfg, Context: raw.CurrentContext, Server: server}, nil
}

// Check applies the policy to a parsed kubeconfig: the current context must exist, and no
// cluster or user anywhere in it may reference a file or use a feature the policy refuses.
// Entries the current context does not use are checked too, so that what is stored in a
// Secret is safe as a whole.
func Check(raw *clientcmdapi.Config, policy Policy) error {
	if raw.CurrentContext == "" {
		return reject(ReasonNoCurrentContext, "no current-context is set")
	}
	ctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok {
		return reject(ReasonUnknownContext, "current-context %q names no context", raw.CurrentContext)
	}
	if _, ok := raw.Clusters[ctx.Cluster]; !ok {
		return reject(ReasonUnknownContext, "context %q names cluster %q, which is not defined", raw.CurrentContext, ctx.Cluster)
	}
	if _, ok := raw.AuthInfos[ctx.AuthInfo]; !ok && ctx.AuthInfo != "" {
		return reject(ReasonUnknownContext, "context %q names user %q, which is not defined", raw.CurrentContext, ctx.AuthInfo)
	}
	for _, name := range sortedKeys(raw.Clusters) {
		if err := checkCluster(name, raw.Clusters[name], policy); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(raw.AuthInfos) {
		if err := checkUser(name, raw.AuthInfos[name], policy); err != nil {
			return err
		}
	}
	return nil
}

func checkCluster(name string, c *clientcmdapi.Cluster, policy Policy) error {
	if c.CertificateAuthority != "" {
		return reject(ReasonFileReference, "cluster %q reads certificate-authority from a file; embed it as certificate-authority-data", name)
	}
	if c.InsecureSkipTLSVerify && !policy.AllowInsecureTLS {
		return reject(ReasonInsecureTLS, "cluster %q sets insecure-skip-tls-verify; the operator allows it only with --allow-insecure-tls", name)
	}
	if strings.HasPrefix(strings.ToLower(c.Server), "http://") && !policy.AllowInsecureTLS {
		return reject(ReasonInsecureTLS, "cluster %q uses plain http; the operator allows it only with --allow-insecure-tls", name)
	}
	return nil
}

func checkUser(name string, u *clientcmdapi.AuthInfo, policy Policy) error {
	switch {
	case u.TokenFile != "":
		return reject(ReasonFileReference, "user %q reads tokenFile from a file; embed the token instead", name)
	case u.ClientCertificate != "":
		return reject(ReasonFileReference, "user %q reads client-certificate from a file; embed it as client-certificate-data", name)
	case u.ClientKey != "":
		return reject(ReasonFileReference, "user %q reads client-key from a file; embed it as client-key-data", name)
	}
	if u.AuthProvider != nil && !policy.AllowExec {
		return reject(ReasonAuthProvider, "user %q uses auth-provider %q; the operator allows it only with --allow-kubeconfig-exec", name, u.AuthProvider.Name)
	}
	if u.Exec != nil {
		if !policy.AllowExec {
			return reject(ReasonExecPlugin, "user %q runs exec plugin %q; the operator allows it only with --allow-kubeconfig-exec", name, u.Exec.Command)
		}
		if !slices.Contains(policy.ExecAllowlist, u.Exec.Command) {
			return reject(ReasonExecPlugin, "user %q runs exec plugin %q, which is not in --kubeconfig-exec-allowlist", name, u.Exec.Command)
		}
	}
	return nil
}

// restrictExec makes client-go itself enforce the allowlist on every exec plugin, so a
// plugin can run only if it resolves to an allowed command.
func restrictExec(raw *clientcmdapi.Config, allowlist []string) {
	entries := make([]clientcmdapi.AllowlistEntry, 0, len(allowlist))
	for _, command := range allowlist {
		entries = append(entries, clientcmdapi.AllowlistEntry{Command: command})
	}
	for _, u := range raw.AuthInfos {
		if u.Exec != nil {
			u.Exec.PluginPolicy = clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowlist, Allowlist: entries}
		}
	}
}

// NormalizeServer returns an API server URL in a canonical form, so two spellings of one
// server compare equal: lower-case scheme and host, the scheme's default port made
// explicit, no trailing slash, no query or fragment. Only http and https are accepted.
func NormalizeServer(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("server %q is not a URL", raw)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", fmt.Errorf("server %q is not an http or https URL", raw)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("server %q has no host", raw)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[scheme]
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	return scheme + "://" + net.JoinHostPort(host, port) + path, nil
}

// parseLine keeps only the position from a YAML or JSON error: the rest may quote the
// document, and the document holds credentials.
var parseLine = regexp.MustCompile(`line \d+`)

func sanitizeParseError(err error) string {
	if loc := parseLine.FindString(err.Error()); loc != "" {
		return "syntax error at " + loc
	}
	return "not a valid kubeconfig document"
}

// redact removes every credential of raw from message, for errors that client-go builds
// from the configuration.
func redact(message string, raw *clientcmdapi.Config) string {
	for _, u := range raw.AuthInfos {
		for _, secret := range []string{u.Token, u.Password, string(u.ClientKeyData), string(u.ClientCertificateData)} {
			if len(secret) >= 4 {
				message = strings.ReplaceAll(message, secret, "[redacted]")
			}
		}
	}
	return message
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
