package operator_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/inventory"
	"github.com/vidra-operator/vidra/internal/test/capi"
	"github.com/vidra-operator/vidra/internal/test/clusterprofile"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// inventoryNamespace is the one namespace the shared hub's chart has the operator read
// Cluster API and ClusterProfiles from; profilesNamespace is where it publishes its
// clusters' ClusterProfiles.
const (
	inventoryNamespace = "fleet-a"
	profilesNamespace  = "fleet-profiles"
)

// hubCRDs are Vidra's CRDs, Cluster API's Cluster and ClusterProfile, which the shared
// hub serves.
func hubCRDs(t *testing.T) []string {
	t.Helper()
	dirs, err := capi.HubCRDDirectories()
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := clusterprofile.CRDDirectory()
	if err != nil {
		t.Fatal(err)
	}
	return append(dirs, profiles)
}

// With exactly the chart's rights (its defaults: rbac.localApply=none), the operator
// enrolls a Cluster API cluster and a ClusterProfile of the namespace the chart lists,
// and may not read the Secrets of another: a Cluster there is never enrolled.
func TestTheChartsRightsEnrollFromTheListedInventoryAlone(t *testing.T) {
	h := startHubWith(t, true, "none")
	ctx := context.Background()
	// The member enrolled already by its labeled Secret, under another name of its
	// API server: two enrollments of one server would conflict.
	kubeconfig := otherServerName(t, h.fleet.Members[1].Kubeconfig)
	for _, ns := range []string{inventoryNamespace, "fleet-b"} {
		if ns != inventoryNamespace {
			if err := h.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
		}
		cluster := capi.Cluster(ns, "edge", map[string]string{"site": "paris"}, nil)
		if err := h.admin.Create(ctx, cluster); err != nil {
			t.Fatal(err)
		}
		if err := capi.SetPhase(ctx, h.admin, cluster, "Provisioned"); err != nil {
			t.Fatal(err)
		}
		if err := h.admin.Create(ctx, capi.KubeconfigSecret(ns, "edge", kubeconfig)); err != nil {
			t.Fatal(err)
		}
	}
	name := inventoryNamespace + ".edge"
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" Engaged", func() (bool, error) {
		vc := &vidrav1alpha1.VidraCluster{}
		err := h.admin.Get(ctx, client.ObjectKey{Name: name}, vc)
		return err == nil && vc.Status.Phase == vidrav1alpha1.ClusterEngaged, client.IgnoreNotFound(err)
	})
	if err := h.admin.Get(ctx, client.ObjectKey{Name: "fleet-b.edge"}, &vidrav1alpha1.VidraCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Cluster of a namespace the chart does not list was enrolled: %v", err)
	}
	operator, err := client.New(chartToken(ctx, t, h.fleet.Hub.Config), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = operator.Get(ctx, client.ObjectKey{Namespace: "fleet-b", Name: "edge-kubeconfig"}, &corev1.Secret{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the chart's rights read a Secret of a namespace it does not list: %v", err)
	}
	err = operator.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: name}, &corev1.Secret{})
	if err != nil {
		t.Errorf("the enrollment Secret %s: %v", name, err)
	}
	enrollProfile(t, h)
}

// enrollProfile: with the chart's rights, a ClusterProfile of the listed namespace is
// enrolled through the secretreader's token in the operator's namespace.
func enrollProfile(t *testing.T, h *sharedHub) {
	t.Helper()
	ctx := context.Background()
	member := h.fleet.Members[0]
	// Under another name of its API server, as above.
	server, err := url.Parse(member.Server())
	if err != nil {
		t.Fatal(err)
	}
	server.Host = "localhost:" + server.Port()
	profile := clusterprofile.Profile(inventoryNamespace, "core", nil, nil)
	if err := h.admin.Create(ctx, profile); err != nil {
		t.Fatal(err)
	}
	access := clusterprofile.Access(inventory.SecretReaderProvider, server.String(), member.Config.CAData)
	if err := clusterprofile.SetStatus(ctx, h.admin, profile, "True", access); err != nil {
		t.Fatal(err)
	}
	token, err := clusterprofile.AdminToken(ctx, member)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testoperator.Namespace, Name: "core",
		Annotations: map[string]string{vidrav1alpha1.AllowedURLsAnnotation: server.String()}},
		Data: map[string][]byte{"token": []byte(token)}}); err != nil {
		t.Fatal(err)
	}
	name := inventoryNamespace + ".core"
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" Engaged", func() (bool, error) {
		vc := &vidrav1alpha1.VidraCluster{}
		err := h.admin.Get(ctx, client.ObjectKey{Name: name}, vc)
		return err == nil && vc.Status.Phase == vidrav1alpha1.ClusterEngaged, client.IgnoreNotFound(err)
	})
	// And publishes the clusters enrolled otherwise as ClusterProfiles, with its status.
	for _, c := range []string{h.fleet.Members[1].Name, inventoryNamespace + ".edge"} {
		published := clusterprofile.Profile(profilesNamespace, c, nil, nil)
		testfleet.Eventually(t, 60*time.Second, "ClusterProfile "+profilesNamespace+"/"+c+" with a version", func() (bool, error) {
			err := h.admin.Get(ctx, client.ObjectKeyFromObject(published), published)
			version, _, _ := unstructured.NestedString(published.Object, "status", "version", "kubernetes")
			return err == nil && version != "", client.IgnoreNotFound(err)
		})
	}
}

// otherServerName is kubeconfig with its server named localhost rather than 127.0.0.1:
// the same API server, whose certificate names both, under another URL.
func otherServerName(t *testing.T, kubeconfig []byte) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = "localhost:" + u.Port()
		c.Server = u.String()
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
