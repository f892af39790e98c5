package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/testbundle"
)

func contentNamespace(t *testing.T) {
	t.Helper()
	err := fleet.Hub.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vidra-system"}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestUploadStoresALargeBundleAndDeliversIt: a bundle several times the API server's
// object limit is stored in chunks and named by the VidraResource the command creates;
// uploading it again stores nothing new and leaves the VidraResource unchanged.
func TestUploadStoresALargeBundleAndDeliversIt(t *testing.T) {
	contentNamespace(t)
	b, err := testbundle.New(testbundle.Options{MinBytes: 5 << 20, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bundle.yaml")
	if err := os.WriteFile(file, b.Manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := hubKubeconfig(t)
	out, stderr, err := runPlugin(t, "upload", "big", "-f", file, "--cluster", "edge-1", "--namespace", "big", "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatalf("upload: %v\n%s", err, stderr)
	}
	t.Log(out)
	digest := content.Digest(b.Manifest)
	if !strings.Contains(out, "stored "+digest) || !strings.Contains(out, "vidraresource/big created") {
		t.Errorf("output %q does not show the digest and the VidraResource created", out)
	}
	vr := &vidrav1alpha1.VidraResource{}
	if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: "big"}, vr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), vr) })
	if vr.Spec.Content == nil || vr.Spec.Content.Digest != digest || vr.Spec.Manifest != "" ||
		vr.Spec.Destination.Cluster != "edge-1" || vr.Spec.Destination.Namespace != "big" {
		t.Errorf("VidraResource spec = %+v", vr.Spec)
	}
	store := &content.Store{Client: fleet.Hub.Client, Reader: fleet.Hub.Client, Namespace: "vidra-system"}
	got, err := store.Get(context.Background(), digest)
	if err != nil || !bytes.Equal(got, b.Manifest) {
		t.Fatalf("stored content: %d bytes, %v", len(got), err)
	}

	out, stderr, err = runPlugin(t, "upload", "big", "-f", file, "--kubeconfig", kubeconfig)
	if err != nil || !strings.Contains(out, "vidraresource/big unchanged") {
		t.Errorf("second upload: %q, %v\n%s", out, err, stderr)
	}
}

// TestUploadRefusesABrokenBundleAndStoresNothing: the document that does not decode is
// named, and no chunk is written.
func TestUploadRefusesABrokenBundleAndStoresNothing(t *testing.T) {
	contentNamespace(t)
	file := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\nkind: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runPlugin(t, "upload", "broken", "-f", file, "--kubeconfig", hubKubeconfig(t))
	if err == nil || !strings.Contains(err.Error(), "document[1]") {
		t.Fatalf("err = %v, want the broken document named", err)
	}
	if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: "broken"}, &vidrav1alpha1.VidraResource{}); !apierrors.IsNotFound(err) {
		t.Errorf("a VidraResource was written for a broken bundle: %v", err)
	}
}

// TestManifestAndContentTogetherAreRefusedByTheAPIServer: the CRD says a VidraResource
// holds its bundle one way.
func TestManifestAndContentTogetherAreRefusedByTheAPIServer(t *testing.T) {
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "both"},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			Content:  &vidrav1alpha1.ContentReference{Digest: content.Digest([]byte("x"))},
		},
	}
	err := fleet.Hub.Client.Create(context.Background(), vr)
	if err == nil || !strings.Contains(err.Error(), "set manifest or content, not both") {
		t.Errorf("create with both: %v", err)
	}
	vr.Spec.Manifest, vr.Spec.Content.Digest = "", "sha256:nothex"
	if err := fleet.Hub.Client.Create(context.Background(), vr); err == nil || !strings.Contains(err.Error(), "spec.content.digest") {
		t.Errorf("create with a bad digest: %v", err)
	}
}
