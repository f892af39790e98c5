package inventory_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/test/capi"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

func createNamespace(t *testing.T, name string) {
	t.Helper()
	err := fleet.Hub.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := fleet.Hub.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// waitCluster waits until the VidraCluster name is in phase with reason (any reason when
// ""), and returns it.
func waitCluster(t *testing.T, name string, phase vidrav1alpha1.ClusterPhase, reason string) *vidrav1alpha1.VidraCluster {
	t.Helper()
	vc := &vidrav1alpha1.VidraCluster{}
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" "+string(phase)+" "+reason, func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		ready := findReady(vc)
		return vc.Status.Phase == phase && (reason == "" || (ready != nil && ready.Reason == reason)), nil
	})
	return vc
}

func findReady(vc *vidrav1alpha1.VidraCluster) *metav1.Condition {
	for i := range vc.Status.Conditions {
		if vc.Status.Conditions[i].Type == vidrav1alpha1.ConditionReady {
			return &vc.Status.Conditions[i]
		}
	}
	return nil
}

// A Cluster API Cluster is shown as Provisioning until it is, then enrolled with a scoped
// identity created through its admin kubeconfig (the hub keeps that identity's token
// alone), delivered to, followed as its labels change, and let go when it is deleted. A
// Cluster in a namespace the operator does not read is never enrolled.
func TestAClusterAPIClusterIsEnrolledFollowedAndLetGo(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	member := fleet.Members[0]
	createNamespace(t, listed)
	createNamespace(t, unlisted)
	const name = listed + ".edge"

	cluster := capi.Cluster(listed, "edge", map[string]string{"site": "paris"}, nil)
	create(t, cluster)
	if err := capi.SetPhase(ctx, hub, cluster, "Provisioning"); err != nil {
		t.Fatal(err)
	}
	vc := waitCluster(t, name, vidrav1alpha1.ClusterPending, vidrav1alpha1.ReasonProvisioning)
	if !strings.Contains(vc.Status.Message, "is Provisioning") {
		t.Errorf("message of a Cluster provisioning = %q", vc.Status.Message)
	}
	// Elsewhere, a Cluster with its kubeconfig, in a namespace not listed.
	other := capi.Cluster(unlisted, "edge", nil, nil)
	create(t, other)
	if err := capi.SetPhase(ctx, hub, other, "Provisioned"); err != nil {
		t.Fatal(err)
	}
	create(t, capi.KubeconfigSecret(unlisted, "edge", fleet.Members[1].Kubeconfig))

	if err := capi.SetPhase(ctx, hub, cluster, "Provisioned"); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, name, vidrav1alpha1.ClusterPending, vidrav1alpha1.ReasonProvisioning)
	create(t, capi.KubeconfigSecret(listed, "edge", member.Kubeconfig))
	vc = waitCluster(t, name, vidrav1alpha1.ClusterEngaged, "")
	if vc.Labels["site"] != "paris" {
		t.Errorf("VidraCluster labels = %v, want the Cluster's site=paris", vc.Labels)
	}
	checkScopedIdentity(t, name, "cluster-api")

	checkDelivers(t, name, member)

	// Its labels follow the Cluster's.
	if err := hub.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		t.Fatal(err)
	}
	cluster.SetLabels(map[string]string{"site": "lyon"})
	if err := hub.Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" labeled site=lyon", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, vc)
		return err == nil && vc.Labels["site"] == "lyon", err
	})

	// Deleted, it is let go: its enrollment and its VidraCluster go.
	if err := hub.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" gone", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, &vidrav1alpha1.VidraCluster{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	err := hub.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: name}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the enrollment Secret of a deleted Cluster: %v", err)
	}
	// Nothing from the namespace not listed, all along.
	err = hub.Get(ctx, client.ObjectKey{Name: unlisted + ".edge"}, &vidrav1alpha1.VidraCluster{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a Cluster of a namespace not listed was enrolled: %v", err)
	}
}

// checkDelivers: a bundle sent to the cluster name reaches member.
func checkDelivers(t *testing.T, name string, member *testfleet.Cluster) {
	t.Helper()
	ctx := context.Background()
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "to-" + strings.ReplaceAll(name, ".", "-")},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Destination: vidrav1alpha1.Destination{Cluster: name},
			Manifest:    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + vrName(name) + "\n  namespace: default\ndata:\n  via: inventory\n",
		},
	}
	create(t, vr)
	testfleet.Eventually(t, 60*time.Second, "ConfigMap default/"+vrName(name)+" on "+member.Name, func() (bool, error) {
		err := member.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: vrName(name)}, &corev1.ConfigMap{})
		return err == nil, client.IgnoreNotFound(err)
	})
	if err := fleet.Hub.Client.Delete(ctx, vr); err != nil {
		t.Fatal(err)
	}
}

func vrName(cluster string) string { return "from-" + strings.ReplaceAll(cluster, ".", "-") }

// checkScopedIdentity: the enrollment Secret holds a ServiceAccount's token and nothing
// of Cluster API's admin credentials, and names the identity the operator renews.
func checkScopedIdentity(t *testing.T, name, inventory string) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: testoperator.Namespace, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(secret.Data[vidrav1alpha1.KubeconfigKey])
	if err != nil {
		t.Fatal(err)
	}
	for user, auth := range cfg.AuthInfos {
		if len(auth.ClientCertificateData) > 0 || len(auth.ClientKeyData) > 0 || auth.Token == "" {
			t.Errorf("user %s of the enrollment kubeconfig holds a client certificate or no token", user)
		}
	}
	if got := secret.Annotations[vidrav1alpha1.ServiceAccountAnnotation]; got != identity.DefaultServiceAccount.String() {
		t.Errorf("%s = %q, want %s", vidrav1alpha1.ServiceAccountAnnotation, got, identity.DefaultServiceAccount)
	}
	if secret.Labels[vidrav1alpha1.InventoryLabel] != inventory {
		t.Errorf("enrollment Secret labels = %v", secret.Labels)
	}
}

// Cluster API's kubeconfig is held to the kubeconfig policy as any enrollment: one that
// skips TLS verification is refused, naming the rule, and nothing is created.
func TestAClusterAPIKubeconfigThePolicyRefusesIsNotEnrolled(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, listed)
	cfg, err := clientcmd.Load(fleet.Members[1].Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
	}
	insecure, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	cluster := capi.Cluster(listed, "insecure", nil, map[string]string{vidrav1alpha1.IdentityNamespacesAnnotation: "web"})
	create(t, cluster)
	if err := capi.SetPhase(ctx, fleet.Hub.Client, cluster, "Provisioned"); err != nil {
		t.Fatal(err)
	}
	create(t, capi.KubeconfigSecret(listed, "insecure", insecure))
	vc := waitCluster(t, listed+".insecure", vidrav1alpha1.ClusterRejected, vidrav1alpha1.ReasonInventoryRefused)
	if !strings.Contains(vc.Status.Message, string(vidrav1alpha1.ReasonInsecureTLSNotAllowed)) {
		t.Errorf("message = %q, want the rule named", vc.Status.Message)
	}
	err = fleet.Members[1].Client.Get(ctx, client.ObjectKey{Name: "web"}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("namespace web of the refused identity on %s: %v", fleet.Members[1].Name, err)
	}
	if err := fleet.Hub.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
}
