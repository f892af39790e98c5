package infrahubsync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// labelEnrollment sets (or, with "", removes) the label fanout on a member's enrollment
// Secret, which the provider copies to its VidraCluster.
func labelEnrollment(t *testing.T, member, value string) {
	t.Helper()
	setClusterLabel(t, member, "fanout", value)
}

// setClusterLabel sets (or, with "", removes) a label of a member's VidraCluster.
func setClusterLabel(t *testing.T, member, key, value string) {
	t.Helper()
	testoperator.LabelCluster(t, fleet.Hub.Client, member, key, value)
}

// A clusterSelector fans every artifact out to the enrolled clusters it selects: a
// cluster joining the selection (relabeled, or enrolled later) gets its VidraResources
// without a download, one leaving loses them.
func TestClusterSelectorFansOutAndFollowsTheFleet(t *testing.T) {
	ctx := context.Background()
	m1, m2, late := fleet.Members[0], fleet.Members[1], fleet.Members[2]
	s := newInfrahub(t, "fanout", infrahubtest.Options{})
	const ns = "ihs-fanout"
	putSites(s, "main", ns, "v1", "paris", "lyon")
	labelEnrollment(t, m1.Name, "yes")
	t.Cleanup(func() { labelEnrollment(t, m1.Name, "") })

	newSync(t, "fanout", "fanout", s, vidrav1alpha1.InfrahubSyncDestination{
		Destination:     vidrav1alpha1.Destination{Namespace: ns},
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fanout": "yes"}},
	})
	allReady(t, "fanout", 2)
	waitValue(t, m1, ns, "paris", "v1")
	if configMapValue(t, m2, ns, "paris") != "" {
		t.Error("a cluster outside the selection got objects")
	}
	downloaded := s.TotalDownloads()

	// member-2 joins the selection.
	labelEnrollment(t, m2.Name, "yes")
	t.Cleanup(func() { labelEnrollment(t, m2.Name, "") })
	allReady(t, "fanout", 4)
	waitValue(t, m2, ns, "lyon", "v1")

	// member-3 is enrolled later, already labeled.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: late.Name, Namespace: namespace, Labels: map[string]string{vidrav1alpha1.ClusterLabel: late.Name, "fanout": "yes"}},
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: late.Kubeconfig},
	}
	if err := fleet.Hub.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	allReady(t, "fanout", 6)
	waitValue(t, late, ns, "paris", "v1")
	if got := s.TotalDownloads(); got != downloaded {
		t.Errorf("clusters joining the selection downloaded %d more times; the content was already on the hub", got-downloaded)
	}

	// An edited VidraResource is restored from its siblings, without a download.
	vr := &resourcesOf(t, "fanout")[0]
	testfleet.Edit(t, fleet.Hub.Client, vr, func(vr *vidrav1alpha1.VidraResource) {
		vr.Spec.Manifest = strings.ReplaceAll(vr.Spec.Manifest, `"v1"`, `"edited"`)
	})
	testfleet.Eventually(t, 30*time.Second, "edited VidraResource restored", func() (bool, error) {
		cur := &vidrav1alpha1.VidraResource{}
		err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(vr), cur)
		return err == nil && !strings.Contains(cur.Spec.Manifest, "edited"), err
	})
	if got := s.TotalDownloads(); got != downloaded {
		t.Errorf("restoring an edited VidraResource downloaded %d times; its siblings hold the content", got-downloaded)
	}

	// member-3 leaves the fleet; member-2 leaves the selection.
	if err := fleet.Hub.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	labelEnrollment(t, m2.Name, "")
	allReady(t, "fanout", 2)
	waitValue(t, m2, ns, "paris", "")
	for _, vr := range resourcesOf(t, "fanout") {
		if vr.Spec.Destination.Cluster != m1.Name || vr.Spec.Destination.Namespace != ns {
			t.Errorf("VidraResource %s delivers to %+v", vr.Name, vr.Spec.Destination)
		}
	}
}

// With clusterFromTarget, each artifact goes to the cluster its target names; a target
// that names no cluster is reported.
func TestClusterFromTargetLetsInfrahubChooseTheCluster(t *testing.T) {
	s := newInfrahub(t, "target", infrahubtest.Options{})
	const ns = "ihs-target"
	putSites(s, "main", ns, "v1", fleet.Members[0].Name, fleet.Members[1].Name, "Not A Cluster")
	newSync(t, "target", "target", s, vidrav1alpha1.InfrahubSyncDestination{ClusterFromTarget: true})
	vrs := allReady(t, "target", 2)
	for _, vr := range vrs {
		if vr.Spec.Destination.Cluster != vr.Annotations[vidrav1alpha1.BundleTargetAnnotation] {
			t.Errorf("VidraResource %s for target %s delivers to %q", vr.Name, vr.Annotations[vidrav1alpha1.BundleTargetAnnotation], vr.Spec.Destination.Cluster)
		}
	}
	waitValue(t, fleet.Members[0], ns, fleet.Members[0].Name, "v1")
	waitValue(t, fleet.Members[1], ns, fleet.Members[1].Name, "v1")
	if configMapValue(t, fleet.Members[0], ns, fleet.Members[1].Name) != "" {
		t.Error("an artifact went to a cluster other than its target's")
	}
	ihs := syncCondition(t, "target", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBundleFailed)
	if !containsAll(readyMessage(ihs), `display label "Not A Cluster" does not name a cluster`) {
		t.Errorf("Ready message = %q", readyMessage(ihs))
	}
}
