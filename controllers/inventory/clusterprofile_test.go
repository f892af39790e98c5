package inventory_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/inventory"
	"github.com/vidra-operator/vidra/internal/test/clusterprofile"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// A ClusterProfile is enrolled through the secretreader access provider: its endpoint
// and CA from status.accessProviders, the token from the Secret of its name in the
// operator's namespace, used once to create the scoped identity. It waits for either,
// is shown Pending while its control plane is not healthy, is delivered to, followed as
// its labels change and let go when deleted; one in a namespace not listed is not read.
func TestAClusterProfileIsEnrolledFollowedAndLetGo(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	member := fleet.Members[1]
	createNamespace(t, listed)
	createNamespace(t, unlisted)
	const name = listed + ".core"
	access := clusterprofile.Access(inventory.SecretReaderProvider, member.Server(), member.Config.CAData)

	profile := clusterprofile.Profile(listed, "core", map[string]string{"site": "paris"}, nil)
	create(t, profile)
	if err := clusterprofile.SetStatus(ctx, hub, profile, "", clusterprofile.Access("open-cluster-management", member.Server(), nil)); err != nil {
		t.Fatal(err)
	}
	vc := waitCluster(t, name, vidrav1alpha1.ClusterPending, vidrav1alpha1.ReasonProvisioning)
	if !strings.Contains(vc.Status.Message, "lists no secretreader provider (it lists open-cluster-management)") {
		t.Errorf("message of a profile without the secretreader provider = %q", vc.Status.Message)
	}
	if err := clusterprofile.SetStatus(ctx, hub, profile, "True", access); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" waiting for its token", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, vc)
		return err == nil && strings.Contains(vc.Status.Message, "Secret "+testoperator.Namespace+"/core is not written yet"), err
	})
	// Elsewhere, a profile with the same name and access, in a namespace not listed.
	other := clusterprofile.Profile(unlisted, "core", nil, nil)
	create(t, other)
	if err := clusterprofile.SetStatus(ctx, hub, other, "True", access); err != nil {
		t.Fatal(err)
	}

	token, err := clusterprofile.AdminToken(ctx, member)
	if err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testoperator.Namespace, Name: "core",
		Annotations: map[string]string{vidrav1alpha1.AllowedURLsAnnotation: member.Server()}},
		Data: map[string][]byte{"token": []byte(token)}})
	vc = waitCluster(t, name, vidrav1alpha1.ClusterEngaged, "")
	if vc.Labels["site"] != "paris" {
		t.Errorf("VidraCluster labels = %v, want the profile's site=paris", vc.Labels)
	}
	checkScopedIdentity(t, name, inventory.ClusterProfileInventory)
	checkDelivers(t, name, member)

	// Its control plane unhealthy, it is shown so, and engaged again once healthy.
	if err := hub.Get(ctx, client.ObjectKeyFromObject(profile), profile); err != nil {
		t.Fatal(err)
	}
	if err := clusterprofile.SetStatus(ctx, hub, profile, "False", access); err != nil {
		t.Fatal(err)
	}
	vc = waitCluster(t, name, vidrav1alpha1.ClusterPending, vidrav1alpha1.ReasonControlPlaneUnhealthy)
	if !strings.Contains(vc.Status.Message, "control plane is not healthy") {
		t.Errorf("message of an unhealthy profile = %q", vc.Status.Message)
	}
	if err := clusterprofile.SetStatus(ctx, hub, profile, "True", access); err != nil {
		t.Fatal(err)
	}
	waitCluster(t, name, vidrav1alpha1.ClusterEngaged, "")

	// Its labels follow the profile's.
	if err := hub.Get(ctx, client.ObjectKeyFromObject(profile), profile); err != nil {
		t.Fatal(err)
	}
	profile.SetLabels(map[string]string{"site": "lyon"})
	if err := hub.Update(ctx, profile); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" labeled site=lyon", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, vc)
		return err == nil && vc.Labels["site"] == "lyon", err
	})
	// A cluster enrolled from a ClusterProfile is not published again (by now the
	// publisher has seen its VidraCluster created, engaged and relabeled).
	err = hub.Get(ctx, client.ObjectKey{Namespace: published, Name: name}, clusterprofile.Profile(published, name, nil, nil))
	if !apierrors.IsNotFound(err) {
		t.Errorf("the cluster of ClusterProfile %s/core was published again: %v", listed, err)
	}

	// Deleted, it is let go.
	if err := hub.Delete(ctx, profile); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 60*time.Second, "VidraCluster "+name+" gone", func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: name}, &vidrav1alpha1.VidraCluster{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	err = hub.Get(ctx, client.ObjectKey{Name: unlisted + ".core"}, &vidrav1alpha1.VidraCluster{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a ClusterProfile of a namespace not listed was enrolled: %v", err)
	}
}

// A profile's token goes only where its Secret allows, and its access is held to the
// kubeconfig policy as any enrollment: one that skips TLS verification is refused, naming
// the rule.
func TestAClusterProfileThePolicyRefusesIsNotEnrolled(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[1]
	createNamespace(t, listed)
	profile := clusterprofile.Profile(listed, "insecure-profile", nil, nil)
	create(t, profile)
	access := clusterprofile.Access(inventory.SecretReaderProvider, member.Server(), nil)
	access["cluster"].(map[string]any)["insecure-skip-tls-verify"] = true
	if err := clusterprofile.SetStatus(ctx, fleet.Hub.Client, profile, "True", access); err != nil {
		t.Fatal(err)
	}
	// The profile's name picks the token's Secret: one that does not list the server the
	// profile names is not sent there.
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testoperator.Namespace, Name: "insecure-profile"},
		Data: map[string][]byte{"token": []byte("not-sent-anywhere")}}
	create(t, token)
	vc := waitCluster(t, listed+".insecure-profile", vidrav1alpha1.ClusterRejected, vidrav1alpha1.ReasonInventoryRefused)
	if !strings.Contains(vc.Status.Message, vidrav1alpha1.AllowedURLsAnnotation) {
		t.Errorf("message = %q, want the Secret's allowed URLs named", vc.Status.Message)
	}
	testfleet.Edit(t, fleet.Hub.Client, token, func(s *corev1.Secret) {
		s.Annotations = map[string]string{vidrav1alpha1.AllowedURLsAnnotation: member.Server()}
	})
	testfleet.Eventually(t, 60*time.Second, "the insecure profile refused by the kubeconfig policy", func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: listed + ".insecure-profile"}, vc)
		return err == nil && strings.Contains(vc.Status.Message, string(vidrav1alpha1.ReasonInsecureTLSNotAllowed)), err
	})
	if !strings.Contains(vc.Status.Message, string(vidrav1alpha1.ReasonInsecureTLSNotAllowed)) {
		t.Errorf("message = %q, want the rule named", vc.Status.Message)
	}
	if strings.Contains(vc.Status.Message, "not-sent-anywhere") {
		t.Errorf("the token shows in the message: %q", vc.Status.Message)
	}
	if err := fleet.Hub.Client.Delete(ctx, profile); err != nil {
		t.Fatal(err)
	}
}
