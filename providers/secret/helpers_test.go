package secret_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// enroll creates a kubeconfig Secret labeled to enroll cluster name, with extra labels,
// and deletes it when the test ends.
func enroll(t testing.TB, secretName, clusterName string, kubeconfig []byte, extra map[string]string) *corev1.Secret {
	t.Helper()
	labels := map[string]string{vidrav1alpha1.ClusterLabel: clusterName}
	for k, v := range extra {
		labels[k] = v
	}
	return createSecret(t, secretName, labels, kubeconfig)
}

func createSecret(t testing.TB, name string, labels map[string]string, kubeconfig []byte) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: kubeconfig},
	}
	if err := fleet.Hub.Client.Create(context.Background(), s); err != nil {
		t.Fatalf("create Secret %s: %v", name, err)
	}
	t.Cleanup(func() { retireSecret(t, s) })
	return s
}

// retireSecret deletes the Secret and waits until the provider has let go of it.
func retireSecret(t testing.TB, s *corev1.Secret) {
	t.Helper()
	deleteSecret(t, s)
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	testfleet.Eventually(t, 15*time.Second, "Secret "+s.Name+" retired", func() (bool, error) {
		var list vidrav1alpha1.VidraClusterList
		if err := fleet.Hub.Client.List(context.Background(), &list); err != nil {
			return false, err
		}
		for _, vc := range list.Items {
			if ref := vc.Status.SecretRef; ref != nil && ref.Name == s.Name && ref.Namespace == s.Namespace {
				return false, nil
			}
		}
		return !provider.Enrolls(key), nil
	})
}

func deleteSecret(t testing.TB, s *corev1.Secret) {
	t.Helper()
	err := fleet.Hub.Client.Delete(context.Background(), s)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete Secret %s: %v", s.Name, err)
	}
}

// vidraCluster waits until the VidraCluster name satisfies cond and returns it.
func vidraCluster(t *testing.T, name string, timeout time.Duration, what string, cond func(*vidrav1alpha1.VidraCluster) bool) *vidrav1alpha1.VidraCluster {
	t.Helper()
	vc := &vidrav1alpha1.VidraCluster{}
	testfleet.Eventually(t, timeout, "VidraCluster "+name+" "+what, func() (bool, error) {
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vc)
		return err == nil && cond(vc), err
	})
	return vc
}

func phaseIs(phase vidrav1alpha1.ClusterPhase) func(*vidrav1alpha1.VidraCluster) bool {
	return func(vc *vidrav1alpha1.VidraCluster) bool { return vc.Status.Phase == phase }
}

func readyReason(vc *vidrav1alpha1.VidraCluster) string {
	if c := meta.FindStatusCondition(vc.Status.Conditions, vidrav1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// vidraClusterGone waits until the VidraCluster name no longer exists.
func vidraClusterGone(t *testing.T, name string) {
	t.Helper()
	testfleet.Eventually(t, 10*time.Second, "VidraCluster "+name+" deleted", func() (bool, error) {
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, &vidrav1alpha1.VidraCluster{})
		return apierrors.IsNotFound(err), err
	})
}

// warningEvent waits for a Warning Event with reason on the Secret and returns its note.
func warningEvent(t *testing.T, s *corev1.Secret, reason string) string {
	t.Helper()
	var note string
	testfleet.Eventually(t, 10*time.Second, "Warning "+reason+" on Secret "+s.Name, func() (bool, error) {
		var list eventsv1.EventList
		if err := fleet.Hub.Client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == s.Name && e.Regarding.Kind == "Secret" && e.Type == corev1.EventTypeWarning && e.Reason == reason {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	return note
}

// loadKubeconfig parses a kubeconfig.
func loadKubeconfig(t *testing.T, data []byte) *clientcmdapi.Config {
	t.Helper()
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// mutateKubeconfig parses a kubeconfig, changes it and encodes it again.
func mutateKubeconfig(t *testing.T, data []byte, mutate func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg := loadKubeconfig(t, data)
	mutate(cfg)
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// currentUser returns the user entry of a kubeconfig's current context.
func currentUser(cfg *clientcmdapi.Config) *clientcmdapi.AuthInfo {
	return cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
}

// currentCluster returns the cluster entry of a kubeconfig's current context.
func currentCluster(cfg *clientcmdapi.Config) *clientcmdapi.Cluster {
	return cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
}

// credentials returns the secret parts of a kubeconfig, to check none leaks.
func credentials(t *testing.T, data []byte) []string {
	t.Helper()
	cfg := loadKubeconfig(t, data)
	var out []string
	for _, u := range cfg.AuthInfos {
		for _, s := range []string{u.Token, u.Password, string(u.ClientKeyData)} {
			if len(s) > 8 {
				out = append(out, s)
			}
		}
		if len(u.ClientKeyData) > 64 {
			// A PEM key's body, without its header line, is what a leak would show.
			out = append(out, strings.Split(string(u.ClientKeyData), "\n")[1])
		}
	}
	return out
}

// metricValue reads a metric of the operator under test; -1 when absent.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return testfleet.MetricValue(t, metrics, name, labels)
}
