package kubeconfig

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const secretToken = "s3cr3t-token-value-never-shown"

// base is a well-formed single-context kubeconfig with an embedded token.
func base() *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["edge"] = &clientcmdapi.Cluster{Server: "https://edge.example.com:6443", CertificateAuthorityData: []byte("ca")}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: secretToken}
	cfg.Contexts["edge"] = &clientcmdapi.Context{Cluster: "edge", AuthInfo: "admin"}
	cfg.CurrentContext = "edge"
	return cfg
}

func encode(t *testing.T, cfg *clientcmdapi.Config) []byte {
	t.Helper()
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestAcceptsAnEmbeddedCredentialKubeconfig(t *testing.T) {
	got, err := Load(encode(t, base()), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != "https://edge.example.com:6443" || got.Context != "edge" {
		t.Errorf("got server %q context %q", got.Server, got.Context)
	}
	if got.REST.BearerToken != secretToken || got.REST.Host != "https://edge.example.com:6443" {
		t.Errorf("rest config not built from the current context: host %q", got.REST.Host)
	}
}

func TestRejectsHostileKubeconfigs(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*clientcmdapi.Config)
		policy Policy
		reason Reason
	}{
		{"exec plugin", func(c *clientcmdapi.Config) {
			c.AuthInfos["admin"].Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "cat /etc/shadow"}, APIVersion: "client.authentication.k8s.io/v1"}
		}, Policy{}, ReasonExecPlugin},
		{"exec plugin allowed but not in the allowlist", func(c *clientcmdapi.Config) {
			c.AuthInfos["admin"].Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1"}
		}, Policy{AllowExec: true, ExecAllowlist: []string{"kubelogin"}}, ReasonExecPlugin},
		{"auth-provider plugin", func(c *clientcmdapi.Config) {
			c.AuthInfos["admin"].AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		}, Policy{}, ReasonAuthProvider},
		{"tokenFile", func(c *clientcmdapi.Config) {
			c.AuthInfos["admin"].TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		}, Policy{AllowExec: true, AllowInsecureTLS: true}, ReasonFileReference},
		{"client certificate file", func(c *clientcmdapi.Config) {
			c.AuthInfos["admin"].ClientCertificate = "/etc/kubernetes/pki/admin.crt"
		}, Policy{AllowExec: true, AllowInsecureTLS: true}, ReasonFileReference},
		{"client key file", func(c *clientcmdapi.Config) {
			c.AuthInfos["admin"].ClientKey = "/etc/kubernetes/pki/admin.key"
		}, Policy{AllowExec: true, AllowInsecureTLS: true}, ReasonFileReference},
		{"certificate authority file", func(c *clientcmdapi.Config) {
			c.Clusters["edge"].CertificateAuthority = "/etc/kubernetes/pki/ca.crt"
		}, Policy{AllowExec: true, AllowInsecureTLS: true}, ReasonFileReference},
		{"file reference in an entry the current context does not use", func(c *clientcmdapi.Config) {
			c.AuthInfos["other"] = &clientcmdapi.AuthInfo{TokenFile: "/etc/passwd"}
		}, Policy{}, ReasonFileReference},
		{"insecure-skip-tls-verify", func(c *clientcmdapi.Config) {
			c.Clusters["edge"].InsecureSkipTLSVerify = true
			c.Clusters["edge"].CertificateAuthorityData = nil
		}, Policy{}, ReasonInsecureTLS},
		{"plain http server", func(c *clientcmdapi.Config) {
			c.Clusters["edge"].Server = "http://edge.example.com:8080"
		}, Policy{}, ReasonInsecureTLS},
		{"no current-context", func(c *clientcmdapi.Config) {
			c.CurrentContext = ""
		}, Policy{}, ReasonNoCurrentContext},
		{"unknown current-context", func(c *clientcmdapi.Config) {
			c.CurrentContext = "prod"
		}, Policy{}, ReasonUnknownContext},
		{"context naming an undefined cluster", func(c *clientcmdapi.Config) {
			c.Contexts["edge"].Cluster = "nowhere"
		}, Policy{}, ReasonUnknownContext},
		{"server that is not a URL", func(c *clientcmdapi.Config) {
			c.Clusters["edge"].Server = "edge.example.com:6443"
		}, Policy{}, ReasonInvalidServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.mutate(cfg)
			_, err := Load(encode(t, cfg), tt.policy)
			var rejected *RejectedError
			if !errors.As(err, &rejected) {
				t.Fatalf("Load = %v, want a RejectedError with reason %s", err, tt.reason)
			}
			if rejected.Reason != tt.reason {
				t.Errorf("reason = %s (%s), want %s", rejected.Reason, rejected.Message, tt.reason)
			}
			if strings.Contains(err.Error(), secretToken) {
				t.Errorf("error reveals the token: %v", err)
			}
		})
	}
}

func TestAllowedExecPluginIsRestrictedByClientGo(t *testing.T) {
	cfg := base()
	cfg.AuthInfos["admin"].Token = ""
	cfg.AuthInfos["admin"].Exec = &clientcmdapi.ExecConfig{Command: "kubelogin", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	got, err := Load(encode(t, cfg), Policy{AllowExec: true, ExecAllowlist: []string{"kubelogin"}})
	if err != nil {
		t.Fatal(err)
	}
	policy := got.REST.ExecProvider.PluginPolicy
	if policy.PolicyType != clientcmdapi.PluginPolicyAllowlist || len(policy.Allowlist) != 1 || policy.Allowlist[0].Command != "kubelogin" {
		t.Errorf("exec plugin policy = %+v, want an allowlist of kubelogin", policy)
	}
}

func TestInsecureTLSAllowedByPolicy(t *testing.T) {
	cfg := base()
	cfg.Clusters["edge"].InsecureSkipTLSVerify = true
	cfg.Clusters["edge"].CertificateAuthorityData = nil
	if _, err := Load(encode(t, cfg), Policy{AllowInsecureTLS: true}); err != nil {
		t.Errorf("insecure TLS with --allow-insecure-tls: %v", err)
	}
}

func TestParseErrorsDoNotQuoteTheDocument(t *testing.T) {
	data := []byte("apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: " + secretToken + "\n   bad: [indent\n")
	_, err := Load(data, Policy{})
	var rejected *RejectedError
	if !errors.As(err, &rejected) || rejected.Reason != ReasonInvalid {
		t.Fatalf("Load = %v, want InvalidKubeconfig", err)
	}
	if strings.Contains(err.Error(), secretToken) || strings.Contains(err.Error(), "indent") {
		t.Errorf("error quotes the document: %v", err)
	}
}

func TestNormalizeServer(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://Edge.Example.com", "https://edge.example.com:443"},
		{"https://edge.example.com:443/", "https://edge.example.com:443"},
		{"HTTPS://edge.example.com:6443", "https://edge.example.com:6443"},
		{"http://10.0.0.1", "http://10.0.0.1:80"},
		{"https://[::1]:6443/", "https://[::1]:6443"},
		{"https://rancher.example.com/k8s/clusters/c-abc/", "https://rancher.example.com:443/k8s/clusters/c-abc"},
		{"https://edge.example.com:6443?x=1#f", "https://edge.example.com:6443"},
	}
	for _, tt := range tests {
		got, err := NormalizeServer(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeServer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "edge.example.com", "ftp://edge.example.com", "https://", "https://:6443"} {
		if got, err := NormalizeServer(bad); err == nil {
			t.Errorf("NormalizeServer(%q) = %q, want an error", bad, got)
		}
	}
	// Servers that merely contain one another are different servers.
	a, _ := NormalizeServer("https://edge.example.com:6443")
	b, _ := NormalizeServer("https://edge.example.com.attacker.net:6443")
	if a == b {
		t.Error("a host and a longer host containing it normalise to the same server")
	}
}
