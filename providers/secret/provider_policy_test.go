package secret_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// TestHostileKubeconfigsAreRejected: a kubeconfig Secret is untrusted input. Each of
// these is refused with a Rejected VidraCluster and a Warning Event naming the reason, is
// never engaged, and no credential of it shows anywhere.
func TestHostileKubeconfigsAreRejected(t *testing.T) {
	good := fleet.Members[1].Kubeconfig
	secrets := credentials(t, good)
	tests := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"exec plugin", mutateKubeconfig(t, good, func(c *clientcmdapi.Config) {
			currentUser(c).Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "id"}, APIVersion: "client.authentication.k8s.io/v1"}
		}), "ExecPluginNotAllowed"},
		{"auth-provider plugin", mutateKubeconfig(t, good, func(c *clientcmdapi.Config) {
			currentUser(c).AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		}), "AuthProviderNotAllowed"},
		{"tokenFile", mutateKubeconfig(t, good, func(c *clientcmdapi.Config) {
			currentUser(c).TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		}), "FileReference"},
		{"client certificate and key files", mutateKubeconfig(t, good, func(c *clientcmdapi.Config) {
			u := currentUser(c)
			u.ClientCertificateData, u.ClientKeyData = nil, nil
			u.ClientCertificate, u.ClientKey = "/etc/kubernetes/pki/admin.crt", "/etc/kubernetes/pki/admin.key"
		}), "FileReference"},
		{"certificate authority file", mutateKubeconfig(t, good, func(c *clientcmdapi.Config) {
			cl := currentCluster(c)
			cl.CertificateAuthorityData, cl.CertificateAuthority = nil, "/etc/kubernetes/pki/ca.crt"
		}), "FileReference"},
		{"insecure-skip-tls-verify", mutateKubeconfig(t, good, func(c *clientcmdapi.Config) {
			cl := currentCluster(c)
			cl.CertificateAuthorityData, cl.InsecureSkipTLSVerify = nil, true
		}), "InsecureTLSNotAllowed"},
		{"no current-context", mutateKubeconfig(t, good, func(c *clientcmdapi.Config) { c.CurrentContext = "" }), "NoCurrentContext"},
		{"unknown current-context", mutateKubeconfig(t, good, func(c *clientcmdapi.Config) { c.CurrentContext = "elsewhere" }), "UnknownContext"},
		{"not a kubeconfig", []byte("{{{ not yaml"), "InvalidKubeconfig"},
		{"no kubeconfig at all", nil, "MissingKubeconfig"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("hostile-%d", i)
			s := enroll(t, name+"-kubeconfig", name, tt.data, nil)
			vc := vidraCluster(t, name, 10*time.Second, "Rejected", phaseIs(vidrav1alpha1.ClusterRejected))
			if got := readyReason(vc); got != tt.reason {
				t.Errorf("Ready reason = %q (%s), want %q", got, vc.Status.Message, tt.reason)
			}
			note := warningEvent(t, s, tt.reason)
			if v := metricValue(t, "vidra_cluster_rejected_total", map[string]string{"reason": tt.reason}); v < 1 {
				t.Errorf("vidra_cluster_rejected_total{reason=%q} = %v, want at least 1", tt.reason, v)
			}
			if _, err := provider.Get(context.Background(), multicluster.ClusterName(name)); !errors.Is(err, multicluster.ErrClusterNotFound) {
				t.Errorf("a rejected cluster was engaged (Get = %v)", err)
			}
			for _, secret := range secrets {
				if strings.Contains(vc.Status.Message, secret) || strings.Contains(note, secret) {
					t.Error("a credential reached the VidraCluster status or an Event")
				}
			}
		})
	}
}

func TestInvalidClusterNameIsReportedOnTheSecret(t *testing.T) {
	s := createSecret(t, "bad-name-kubeconfig", map[string]string{vidrav1alpha1.ClusterLabel: "Not_A_Name"}, fleet.Members[1].Kubeconfig)
	note := warningEvent(t, s, "InvalidClusterName")
	if !strings.Contains(note, "Not_A_Name") {
		t.Errorf("event %q does not name the label value", note)
	}
}

// TestDuplicatesRejectTheLaterSecret: two Secrets claiming one name, or one server, leave
// the earlier engaged and reject the later, naming the earlier; when the earlier goes,
// the later takes over.
func TestDuplicatesRejectTheLaterSecret(t *testing.T) {
	first := enroll(t, "dup-1-kubeconfig", "dup-a", fleet.Members[1].Kubeconfig, nil)
	vidraCluster(t, "dup-a", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))

	sameName := enroll(t, "dup-2-kubeconfig", "dup-a", fleet.Members[2].Kubeconfig, nil)
	note := warningEvent(t, sameName, "DuplicateClusterName")
	if !strings.Contains(note, namespace+"/"+first.Name) {
		t.Errorf("event %q does not name the earlier Secret", note)
	}
	sameServer := enroll(t, "dup-3-kubeconfig", "dup-b", fleet.Members[1].Kubeconfig, nil)
	vc := vidraCluster(t, "dup-b", 10*time.Second, "Rejected", phaseIs(vidrav1alpha1.ClusterRejected))
	if readyReason(vc) != "DuplicateServer" || !strings.Contains(vc.Status.Message, namespace+"/"+first.Name) {
		t.Errorf("dup-b: reason %q message %q, want DuplicateServer naming %s", readyReason(vc), vc.Status.Message, first.Name)
	}
	warningEvent(t, sameServer, "DuplicateServer")
	vc = vidraCluster(t, "dup-a", time.Second, "still the first Secret's", phaseIs(vidrav1alpha1.ClusterEngaged))
	if vc.Status.SecretRef.Name != first.Name {
		t.Errorf("dup-a now shows Secret %s", vc.Status.SecretRef.Name)
	}

	retireSecret(t, first)
	vidraCluster(t, "dup-a", 15*time.Second, "taken over by the second Secret", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Phase == vidrav1alpha1.ClusterEngaged && vc.Status.SecretRef.Name == sameName.Name
	})
	vidraCluster(t, "dup-b", 15*time.Second, "engaged once its server is free", phaseIs(vidrav1alpha1.ClusterEngaged))
}

// TestServerMatchingIsExact: destination.server finds a cluster by its normalised server
// URL, never by a substring of it.
func TestServerMatchingIsExact(t *testing.T) {
	member := fleet.Members[1]
	enroll(t, "exact-kubeconfig", "exact", member.Kubeconfig, nil)
	vidraCluster(t, "exact", 15*time.Second, "Engaged", phaseIs(vidrav1alpha1.ClusterEngaged))
	server := strings.TrimRight(currentCluster(loadKubeconfig(t, member.Kubeconfig)).Server, "/") // https://127.0.0.1:PORT
	port := server[strings.LastIndex(server, ":")+1:]

	for _, same := range []string{server, server + "/", strings.Replace(server, "https", "HTTPS", 1)} {
		if name, ok := provider.ClusterForServer(same); !ok || name != "exact" {
			t.Errorf("ClusterForServer(%q) = %q, %v; want exact", same, name, ok)
		}
	}
	for _, other := range []string{
		"https://127.0.0.10:" + port,         // contains the host
		"https://127.0.0.1:" + port + "0",    // contains the port
		"https://127.0.0.1:" + port + "/x",   // a path below it
		"https://127.0.0.1.evil.net:" + port, // the host as a prefix
		"http://127.0.0.1:" + port,           // another scheme
	} {
		if name, ok := provider.ClusterForServer(other); ok {
			t.Errorf("ClusterForServer(%q) = %q, want no cluster", other, name)
		}
	}
}
