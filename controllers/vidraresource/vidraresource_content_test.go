package vidraresource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/testbundle"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

func withContent(digest string) func(*vidrav1alpha1.VidraResource) {
	return func(vr *vidrav1alpha1.VidraResource) {
		vr.Spec.Manifest = ""
		vr.Spec.Content = &vidrav1alpha1.ContentReference{Digest: digest}
	}
}

// readyWithin waits for Ready=True as ready does, for longer: large bundles take a while.
func readyWithin(t *testing.T, name string, timeout time.Duration) *vidrav1alpha1.VidraResource {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	testfleet.Eventually(t, timeout, name+" Ready", func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vr); err != nil {
			return false, err
		}
		c := conditionOf(vr, vidrav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation, nil
	})
	return vr
}

func conditionOf(vr *vidrav1alpha1.VidraResource, t string) *metav1.Condition {
	for i := range vr.Status.Conditions {
		if vr.Status.Conditions[i].Type == t {
			return &vr.Status.Conditions[i]
		}
	}
	return nil
}

// TestBundleOfRealSizeFromTheContentStoreIsDelivered: a bundle of more than 5 MiB —
// KubeVirt's CRDs, generated CRDs with a custom resource each, and ConfigMaps — stored in
// the content store reaches a member whole, and a second VidraResource delivering the
// same content to the other member shares the one stored copy.
func TestBundleOfRealSizeFromTheContentStoreIsDelivered(t *testing.T) {
	ctx := context.Background()
	b, err := testbundle.New(testbundle.Options{MinBytes: 5 << 20, Group: "direct.example", Seed: 21})
	if err != nil {
		t.Fatal(err)
	}
	digest, err := store.Put(ctx, b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for i, member := range fleet.Members {
		name := "large-" + member.Name
		deliver(t, name, vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "large"}, "", withContent(digest))
		vr := readyWithin(t, name, 3*time.Minute)
		if got := int(vr.Status.ResourceCount); got != b.Objects()+1 {
			t.Errorf("member %d: %d objects in the inventory, want the bundle's %d and the namespace", i, got, b.Objects())
		}
		for _, crd := range b.CRDs {
			if !exists(t, member, &apiextensionsv1.CustomResourceDefinition{}, "", crd) {
				t.Errorf("CRD %s is not on %s", crd, member.Name)
			}
		}
		for _, cr := range b.CustomResources {
			f := strings.Fields(cr)
			if !exists(t, member, customResource(f[0], f[1]), "large", f[2]) {
				t.Errorf("%s is not on %s", cr, member.Name)
			}
		}
		cm := &corev1.ConfigMap{}
		last := b.ConfigMaps[len(b.ConfigMaps)-1]
		if !exists(t, member, cm, "large", last) || !owned(t, cm, "hub/"+name) {
			t.Errorf("ConfigMap %s on %s: %v", last, member.Name, cm.Annotations)
		}
	}
	var heads corev1.SecretList
	if err := fleet.Hub.Client.List(ctx, &heads, client.InNamespace(namespace), client.HasLabels{content.ChunkLabel}); err != nil {
		t.Fatal(err)
	}
	info, err := store.Stat(ctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, cm := range heads.Items {
		if cm.Annotations[content.DigestAnnotation] == digest {
			count++
		}
	}
	if count != info.Chunks || info.Chunks < 2 {
		t.Errorf("%d chunks stored for the content (Stat says %d), want one copy in several chunks", count, info.Chunks)
	}
}

// TestDamagedContentStallsNamingTheChunkAndAppliesNothing: content with a chunk missing
// is a Stalled condition naming the chunk's Secret, nothing of the bundle is applied,
// and storing the content again lets it through.
func TestDamagedContentStallsNamingTheChunkAndAppliesNothing(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[1]
	b, err := testbundle.New(testbundle.Options{MinBytes: 600 << 10, WithoutKubeVirt: true, GeneratedCRDs: 1, Group: "damaged.example", Seed: 22})
	if err != nil {
		t.Fatal(err)
	}
	small := &content.Store{Client: fleet.Hub.Client, Reader: fleet.Hub.Client, Namespace: namespace, ChunkSize: 64 << 10}
	digest, err := small.Put(ctx, b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	missing := content.ChunkName(digest, 1)
	if err := fleet.Hub.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: missing}}); err != nil {
		t.Fatal(err)
	}
	deliver(t, "damaged", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "damaged"}, "", withContent(digest))
	vr := condition(t, "damaged", vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonContentUnavailable)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionStalled); !strings.Contains(msg, missing) || !strings.Contains(msg, "missing") {
		t.Errorf("Stalled message %q does not name the missing chunk %s", msg, missing)
	}
	if len(vr.Status.ManagedResources) != 0 || exists(t, member, &corev1.Namespace{}, "", "damaged") ||
		exists(t, member, &corev1.ConfigMap{}, "damaged", b.ConfigMaps[0]) {
		t.Errorf("something of the damaged bundle was applied or recorded: %+v", vr.Status.ManagedResources)
	}
	testfleet.Eventually(t, 10*time.Second, "a Warning Event naming the chunk", func() (bool, error) {
		return hasEvent(ctx, "damaged", vidrav1alpha1.ReasonContentUnavailable, missing)
	})

	// Stored again: the missing chunk is written back and the bundle goes through.
	if _, err := small.Put(ctx, b.Manifest); err != nil {
		t.Fatal(err)
	}
	if _, err := small.Get(ctx, digest); err != nil {
		t.Fatalf("after storing again: %v", err)
	}
	readyWithin(t, "damaged", time.Minute)
	if !exists(t, member, &corev1.ConfigMap{}, "damaged", b.ConfigMaps[0]) {
		t.Error("the repaired bundle was not applied")
	}
}
