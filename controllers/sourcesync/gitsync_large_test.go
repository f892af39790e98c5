package sourcesync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testbundle"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A repository as a user first meets it: a bundle of real size (over what a VidraResource
// holds inline) whose CRDs bring an API group no member serves yet, with custom resources
// of it, into a namespace no member has. It is stored once in the content store, named by
// both clusters' VidraResources, and converges whole on both.
func TestARepositoryOfRealSizeWithANewAPIGroupConvergesOnEveryCluster(t *testing.T) {
	const ns = "gs-large-new"
	b, err := testbundle.New(testbundle.Options{MinBytes: 1536 << 10, WithoutKubeVirt: true, GeneratedCRDs: 2, Group: "git.example", Seed: 51})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range fleet.Members {
		err := m.Client.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("namespace %s on %s: %v, want it absent before the sync", ns, m.Name, err)
		}
	}
	srv := gitserver.New(t)
	repo := srv.Repo(t, "platform")
	commit := repo.Commit(t, "main", map[string]string{"deploy/bundle.yaml": string(b.Manifest)}, "a bundle of real size")
	gs := gitSync("large", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "deploy"
		gs.Spec.Destination = everyMember(ns)
	})
	create(t, gs)
	readyAt(t, gs, "main@sha1:"+commit)

	var vrs []vidrav1alpha1.VidraResource
	testfleet.Eventually(t, 3*time.Minute, "both VidraResources Ready, naming stored content", func() (bool, error) {
		vrs = resourcesOf(t, gs)
		if len(vrs) != len(fleet.Members) {
			return false, nil
		}
		for _, vr := range vrs {
			c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
			if vr.Spec.Content == nil || c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != vr.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	digest := gs.Status.Source.Digest
	for _, vr := range vrs {
		if vr.Spec.Manifest != "" || vr.Spec.Content.Digest != digest {
			t.Errorf("%s holds %d bytes inline and names %v, want only the stored bundle %s", vr.Name, len(vr.Spec.Manifest), vr.Spec.Content, digest)
		}
		if int(vr.Status.ResourceCount) != b.Objects()+1 {
			t.Errorf("%s owns %d objects, want the bundle's %d and the namespace", vr.Name, vr.Status.ResourceCount, b.Objects())
		}
	}
	if got := storedCopies(t, digest); got != 1 {
		t.Errorf("the bundle is stored %d times, want once", got)
	}
	for _, m := range fleet.Members {
		for _, ref := range b.CustomResources {
			cr := strings.Fields(ref)
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(cr[0])
			u.SetKind(cr[1])
			if err := m.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cr[2]}, u); err != nil {
				t.Errorf("%s on %s: %v", ref, m.Name, err)
			}
		}
	}
	if n := srv.Fetches("platform"); n != 1 {
		t.Errorf("%d fetches for one commit delivered to %d clusters, want 1", n, len(fleet.Members))
	}
}

// storedCopies counts the stored copies of a content: its chunk 0s.
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
