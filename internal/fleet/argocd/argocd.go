// Package argocd reads Argo CD's declarative cluster Secrets (labeled
// argocd.argoproj.io/secret-type: cluster; name, server and config), so that a team
// moving from Argo CD enrolls the clusters it has. Their credentials are untrusted input:
// what would run a program (execProviderConfig, awsAuthConfig) is refused, and the
// kubeconfig built is held to the operator's kubeconfig policy as any other.
package argocd

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// SecretTypeLabel marks Argo CD's declarative Secrets; SecretTypeCluster is a cluster's.
const (
	SecretTypeLabel   = "argocd.argoproj.io/secret-type"
	SecretTypeCluster = "cluster"
)

// config is the part of a cluster Secret's config Vidra reads (Argo CD's ClusterConfig).
type config struct {
	Username        string          `json:"username,omitempty"`
	Password        string          `json:"password,omitempty"`
	BearerToken     string          `json:"bearerToken,omitempty"`
	TLSClientConfig tlsClientConfig `json:"tlsClientConfig"`
	// Present, they ask for a program or a cloud's SDK to make credentials.
	ExecProviderConfig json.RawMessage `json:"execProviderConfig,omitempty"`
	AWSAuthConfig      json.RawMessage `json:"awsAuthConfig,omitempty"`
}

type tlsClientConfig struct {
	Insecure   bool   `json:"insecure,omitempty"`
	ServerName string `json:"serverName,omitempty"`
	CAData     []byte `json:"caData,omitempty"`
	CertData   []byte `json:"certData,omitempty"`
	KeyData    []byte `json:"keyData,omitempty"`
}

// Cluster is what an Argo CD cluster Secret enrolls.
type Cluster struct {
	// Name is Argo CD's name of the cluster (its server when it has none).
	Name   string
	Server string
	// Kubeconfig reaches Server with the Secret's credentials.
	Kubeconfig []byte
}

// ErrNotACluster is a Secret that is not an Argo CD cluster Secret.
var ErrNotACluster = errors.New("not an Argo CD cluster Secret")

// Read reads an Argo CD cluster Secret. Its errors name fields, never their values.
func Read(s *corev1.Secret) (Cluster, error) {
	if s.Labels[SecretTypeLabel] != SecretTypeCluster {
		return Cluster{}, ErrNotACluster
	}
	c := Cluster{Name: string(s.Data["name"]), Server: string(s.Data["server"])}
	if c.Server == "" {
		return c, errors.New("it has no server")
	}
	if c.Name == "" {
		c.Name = c.Server
	}
	var cfg config
	if raw := s.Data["config"]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return c, errors.New("its config is not Argo CD's cluster config (JSON)")
		}
	}
	switch {
	case len(cfg.ExecProviderConfig) > 0 && string(cfg.ExecProviderConfig) != "null":
		return c, errors.New("its config.execProviderConfig runs a program for credentials, and the operator runs none: give the cluster a bearerToken or a client certificate (tlsClientConfig.certData, keyData)")
	case len(cfg.AWSAuthConfig) > 0 && string(cfg.AWSAuthConfig) != "null":
		return c, errors.New("its config.awsAuthConfig asks for AWS IAM credentials, which the operator does not make: give the cluster a bearerToken or a client certificate")
	case cfg.BearerToken == "" && cfg.Username == "" && len(cfg.TLSClientConfig.CertData) == 0:
		return c, errors.New("its config holds no credentials (bearerToken, username and password, or tlsClientConfig.certData and keyData)")
	}
	kubeconfig, err := kubeconfigOf(c, cfg)
	if err != nil {
		return c, err
	}
	c.Kubeconfig = kubeconfig
	return c, nil
}

// kubeconfigOf is a kubeconfig of one context reaching the cluster with cfg's credentials.
func kubeconfigOf(c Cluster, cfg config) ([]byte, error) {
	cluster := clientcmdapi.NewCluster()
	cluster.Server = c.Server
	cluster.CertificateAuthorityData = cfg.TLSClientConfig.CAData
	cluster.TLSServerName = cfg.TLSClientConfig.ServerName
	cluster.InsecureSkipTLSVerify = cfg.TLSClientConfig.Insecure
	user := clientcmdapi.NewAuthInfo()
	user.Token, user.Username, user.Password = cfg.BearerToken, cfg.Username, cfg.Password
	user.ClientCertificateData, user.ClientKeyData = cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData
	kc := clientcmdapi.NewConfig()
	kc.Clusters["argocd"], kc.AuthInfos["argocd"] = cluster, user
	kc.Contexts["argocd"] = &clientcmdapi.Context{Cluster: "argocd", AuthInfo: "argocd"}
	kc.CurrentContext = "argocd"
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("build its kubeconfig: %w", err)
	}
	return out, nil
}

// FleetName is the name the cluster of Secret s takes in the fleet: <namespace>.<name>
// after its Argo CD name, or after the Secret's own name when that is no cluster name
// (DNS labels joined by dots, at most 63 characters).
func FleetName(s *corev1.Secret, c Cluster) string {
	name := s.Namespace + "." + c.Name
	if len(vidrav1alpha1.ClusterNameErrors(name)) > 0 {
		return s.Namespace + "." + s.Name
	}
	return name
}
