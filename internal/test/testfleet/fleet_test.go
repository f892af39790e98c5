package testfleet_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

var fleet *testfleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(testfleet.Main(m, testfleet.Options{Members: 2, ControllerManager: true}, func(f *testfleet.Fleet) { fleet = f }))
}

func TestFleetHasAHubAndSeparateMembers(t *testing.T) {
	ctx := context.Background()
	if len(fleet.Members) != 2 {
		t.Fatalf("members = %d, want 2", len(fleet.Members))
	}
	servers := map[string]string{}
	for _, c := range fleet.Clusters() {
		if other, dup := servers[c.Server()]; dup {
			t.Errorf("%s and %s share server %s", c.Name, other, c.Server())
		}
		servers[c.Server()] = c.Name

		// The kubeconfig bytes alone reach the cluster, as an enrollment Secret would.
		cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
		if err != nil {
			t.Fatalf("kubeconfig of %s: %v", c.Name, err)
		}
		version, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerVersion()
		if err != nil {
			t.Fatalf("version of %s: %v", c.Name, err)
		}
		if version.GitVersion != "v1.36.0" {
			t.Errorf("%s reports %s, want v1.36.0", c.Name, version.GitVersion)
		}
	}

	// Objects are per cluster: a ConfigMap made on one member is absent from the other.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-on-member-1", Namespace: "default"}}
	if err := fleet.Members[0].Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	err := fleet.Members[1].Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("member-2 get = %v, want NotFound", err)
	}

	// Vidra's CRDs are on the hub only.
	if err := fleet.Hub.Client.List(ctx, &vidrav1alpha1.VidraResourceList{}); err != nil {
		t.Errorf("list VidraResources on the hub: %v", err)
	}
	if err := fleet.Members[0].Client.List(ctx, &vidrav1alpha1.VidraResourceList{}); err == nil {
		t.Error("VidraResource CRD found on a member")
	}
}

func TestPausedMemberIsUnreachableUntilResumed(t *testing.T) {
	member := fleet.Members[1]
	cfg := rest.CopyConfig(member.Config)
	cfg.Timeout = time.Second
	probe := discovery.NewDiscoveryClientForConfigOrDie(cfg)

	member.PauseInTest(t)
	if _, err := probe.ServerVersion(); err == nil {
		t.Fatal("a paused member answered")
	}
	// The other clusters are not affected.
	if _, err := discovery.NewDiscoveryClientForConfigOrDie(fleet.Members[0].Config).ServerVersion(); err != nil {
		t.Errorf("member-1 while member-2 is paused: %v", err)
	}

	if err := member.Resume(); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 10*time.Second, "resumed member answers", func() (bool, error) {
		_, err := probe.ServerVersion()
		return err == nil, err
	})
}

// A member's API server stopped refuses connections; started again, the same
// kubeconfig reaches it and what it stored is there.
func TestStoppedAPIServerStartsAgainWithItsData(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[1]
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept-across-restart"}}
	if err := member.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(member.Config)
	cfg.Timeout = time.Second
	probe := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	if err := member.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	_, stoppedErr := probe.ServerVersion()
	if err := member.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if stoppedErr == nil {
		t.Error("a stopped API server answered")
	}
	testfleet.Eventually(t, 30*time.Second, "the restarted API server serves what it stored", func() (bool, error) {
		err := member.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		return err == nil, nil
	})
}

// TestControllerManagerDeletesNamespacesAndCollectsGarbage: with the controller manager,
// a deleted namespace goes away with its contents and dependents follow their owner.
func TestControllerManagerDeletesNamespacesAndCollectsGarbage(t *testing.T) {
	ctx := context.Background()
	c := fleet.Members[0].Client

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "inside", Namespace: "doomed"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "namespace doomed deleted", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		return apierrors.IsNotFound(err), err
	})

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "default"}}
	if err := c.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	if err := c.Create(ctx, dependent); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "dependent collected", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), err
	})
}
