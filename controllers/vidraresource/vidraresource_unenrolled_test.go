package vidraresource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestDeletionCompletesWhenTheClusterWasUnenrolled: a VidraResource whose cluster left
// the fleet can still be deleted; what it left there is listed in a Warning Event.
func TestDeletionCompletesWhenTheClusterWasUnenrolled(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[1]
	// The same member under another name: its server spelled with "localhost".
	cfg, err := clientcmd.Load(member.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = strings.Replace(c.Server, "127.0.0.1", "localhost", 1)
	}
	alias, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "leaving", Namespace: namespace, Labels: map[string]string{vidrav1alpha1.ClusterLabel: "leaving"}},
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: alias},
	}
	if err := fleet.Hub.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 30*time.Second, "cluster leaving engaged", func() (bool, error) {
		vc := &vidrav1alpha1.VidraCluster{}
		err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: "leaving"}, vc)
		return err == nil && vc.Status.Phase == vidrav1alpha1.ClusterEngaged, nil
	})
	deliver(t, "left-behind", vidrav1alpha1.Destination{Cluster: "leaving"}, cmManifest("left-behind"))
	ready(t, "left-behind")

	if err := fleet.Hub.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 30*time.Second, "cluster leaving retired", func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: "leaving"}, &vidrav1alpha1.VidraCluster{})
		return err != nil, nil
	})
	remove(t, "left-behind")
	if !exists(t, member, &corev1.ConfigMap{}, "default", "left-behind") {
		t.Error("the object on the un-enrolled cluster vanished; it should be left and reported")
	}
	testfleet.Eventually(t, 10*time.Second, "Warning Event listing what was left", func() (bool, error) {
		return hasEvent(ctx, "left-behind", "", "ConfigMap default/left-behind")
	})
}
