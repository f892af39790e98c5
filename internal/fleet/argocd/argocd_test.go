package argocd

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

func clusterSecret(data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{SecretTypeLabel: SecretTypeCluster}}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// Argo CD's documented shapes: a bearer token with a CA, a client certificate; what runs
// a program or holds no credential is refused, naming the field and no value.
func TestReadBuildsAKubeconfigOrSaysWhyNot(t *testing.T) {
	ok, err := Read(clusterSecret(map[string]string{
		"name": "prod", "server": "https://10.0.0.1:6443",
		"config": `{"bearerToken":"s3cr3t","tlsClientConfig":{"caData":"Q0E=","serverName":"api.prod"}}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(ok.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl, user := cfg.Clusters["argocd"], cfg.AuthInfos["argocd"]
	if ok.Name != "prod" || cl.Server != "https://10.0.0.1:6443" || string(cl.CertificateAuthorityData) != "CA" || cl.TLSServerName != "api.prod" || user.Token != "s3cr3t" {
		t.Errorf("kubeconfig of a bearer token = %+v %+v", cl, user)
	}
	certs, err := Read(clusterSecret(map[string]string{"server": "https://10.0.0.2", "config": `{"tlsClientConfig":{"certData":"Q0VSVA==","keyData":"S0VZ"}}`}))
	if err != nil || certs.Name != "https://10.0.0.2" {
		t.Errorf("a client certificate, no name: %+v, %v", certs, err)
	}
	for want, data := range map[string]map[string]string{
		"execProviderConfig": {"server": "https://x", "config": `{"execProviderConfig":{"command":"argocd-k8s-auth","args":["aws"]}}`},
		"awsAuthConfig":      {"server": "https://x", "config": `{"awsAuthConfig":{"clusterName":"prod"}}`},
		"no credentials":     {"server": "https://x", "config": `{"tlsClientConfig":{"insecure":true}}`},
		"no server":          {"name": "x", "config": `{"bearerToken":"s3cr3t"}`},
		"not Argo CD's":      {"server": "https://x", "config": `{"bearerToken": s3cr3t`},
	} {
		_, err := Read(clusterSecret(data))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: %v", want, err)
		}
	}
	if _, err := Read(&corev1.Secret{}); !errors.Is(err, ErrNotACluster) {
		t.Errorf("an unlabeled Secret: %v", err)
	}
}
