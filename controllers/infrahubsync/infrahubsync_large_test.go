package infrahubsync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testbundle"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestArtifactOfRealSizeIsStoredOnceAndDeliveredToEveryCluster: an artifact of more than
// 5 MiB (over the API server's object limit) fans out to two clusters. It is downloaded
// once, stored once in the content store, named by both VidraResources and applied whole
// on both members; unchanged listings download nothing, and a new version replaces it.
func TestArtifactOfRealSizeIsStoredOnceAndDeliveredToEveryCluster(t *testing.T) {
	ctx := context.Background()
	m1, m2 := fleet.Members[0], fleet.Members[1]
	const ns = "ihs-large"
	b, err := testbundle.New(testbundle.Options{MinBytes: 5 << 20, Group: "sync.example", Seed: 31})
	if err != nil {
		t.Fatal(err)
	}
	s := newInfrahub(t, "large", infrahubtest.Options{})
	put := func(manifest []byte) {
		s.Put("main", infrahubtest.Artifact{ID: "bundle-1", Name: artifactName, Content: string(manifest),
			TargetID: "node-bundle", TargetLabel: "bundle", TargetKind: "InfraSite", DefinitionID: "def-web", DefinitionName: "web-definition"})
	}
	put(b.Manifest)
	labelEnrollment(t, m1.Name, "yes")
	t.Cleanup(func() { labelEnrollment(t, m1.Name, "") })
	labelEnrollment(t, m2.Name, "yes")
	t.Cleanup(func() { labelEnrollment(t, m2.Name, "") })

	newSync(t, "large", "large", s, vidrav1alpha1.InfrahubSyncDestination{
		Destination:     vidrav1alpha1.Destination{Namespace: ns},
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"fanout": "yes"}},
	}, func(ihs *vidrav1alpha1.InfrahubSync) { ihs.Spec.Interval = &metav1.Duration{Duration: time.Second} })

	vrs := readyFor(t, "large", 2, 3*time.Minute, content.Digest(b.Manifest))
	for _, vr := range vrs {
		if vr.Spec.Manifest != "" {
			t.Errorf("%s holds %d bytes inline", vr.Name, len(vr.Spec.Manifest))
		}
		if int(vr.Status.ResourceCount) != b.Objects()+1 {
			t.Errorf("%s owns %d objects, want the bundle's %d and the namespace", vr.Name, vr.Status.ResourceCount, b.Objects())
		}
	}
	for _, m := range []*testfleet.Cluster{m1, m2} {
		cr := strings.Fields(b.CustomResources[0])
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(cr[0])
		u.SetKind(cr[1])
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cr[2]}, u); err != nil {
			t.Errorf("%s on %s: %v", b.CustomResources[0], m.Name, err)
		}
	}
	if got := s.TotalDownloads(); got != 1 {
		t.Errorf("%d downloads for one artifact delivered to two clusters, want 1", got)
	}
	if got := storedCopies(t, content.Digest(b.Manifest)); got != 1 {
		t.Errorf("the content is stored %d times, want once", got)
	}

	// Unchanged listings: nothing downloaded.
	waitGraphQLRequests(t, s, s.GraphQLRequests()+3)
	if got := s.TotalDownloads(); got != 1 {
		t.Errorf("%d downloads after unchanged listings, want 1", got)
	}

	// A new version: downloaded once, stored, and named by both.
	next, err := testbundle.New(testbundle.Options{MinBytes: 5 << 20, Group: "sync.example", Seed: 32})
	if err != nil {
		t.Fatal(err)
	}
	put(next.Manifest)
	readyFor(t, "large", 2, 3*time.Minute, content.Digest(next.Manifest))
	if got := s.TotalDownloads(); got != 2 {
		t.Errorf("%d downloads after one change, want 2", got)
	}
}

// readyFor waits until the sync has n VidraResources naming digest, all Ready.
func readyFor(t *testing.T, sync string, n int, timeout time.Duration, digest string) []vidrav1alpha1.VidraResource {
	t.Helper()
	var vrs []vidrav1alpha1.VidraResource
	testfleet.Eventually(t, timeout, fmt.Sprintf("%d Ready VidraResources of %s naming %s", n, sync, digest), func() (bool, error) {
		vrs = resourcesOf(t, sync)
		if len(vrs) != n {
			return false, nil
		}
		for _, vr := range vrs {
			c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
			if vr.Spec.Content == nil || vr.Spec.Content.Digest != digest ||
				c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != vr.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	return vrs
}

// storedCopies counts the stored copies of the content: its chunk 0s.
func storedCopies(t *testing.T, digest string) int {
	t.Helper()
	var list corev1.SecretList
	if err := fleet.Hub.Client.List(context.Background(), &list, client.InNamespace(namespace), client.HasLabels{content.ChunkLabel}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cm := range list.Items {
		if cm.Annotations[content.DigestAnnotation] == digest && strings.HasPrefix(cm.Annotations[content.IndexAnnotation], "0/") {
			n++
		}
	}
	return n
}
