package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
)

// The operator's preview of a ref, as it writes it: the counts in status.previews, each
// cluster's preview in the content store; the plugin prints each cluster's diff.
func TestPreviewCommandPrintsEachClusterOfARef(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	const ns = "previews-store"
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	computed := metav1.Now()
	const rev = "refs/heads/preview/x@sha1:3333333333333333333333333333333333333333"
	clusters := []vidrav1alpha1.ClusterPreview{
		{Cluster: "edge-lyon", VidraResource: "web-edge-lyon", Preview: &vidrav1alpha1.PreviewStatus{
			Revision: rev, ComputedAt: &computed, Create: 1, Update: 1, Unchanged: 2,
			Changes: []vidrav1alpha1.PreviewChange{
				{Action: vidrav1alpha1.PreviewCreate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", Name: "added"},
				{Action: vidrav1alpha1.PreviewUpdate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", Name: "web", Diff: "--- live\n+++ preview\n-  value: v1\n+  value: v2\n"},
			},
		}},
		{Cluster: "edge-paris", VidraResource: "web-edge-paris", Preview: &vidrav1alpha1.PreviewStatus{
			Revision: rev, Message: "the cluster's delivery policy refuses namespace web",
		}},
		{Cluster: "edge-nice", VidraResource: "web-edge-nice", Skipped: "the cluster pulls its bundles: the hub does not reach it to dry-run"},
	}
	data, err := json.Marshal(clusters)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := (&content.Store{Client: hub, Reader: hub, Namespace: ns}).Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	gs := &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: "webpreviews"},
		Spec: vidrav1alpha1.GitSyncSpec{
			Source:   vidrav1alpha1.GitSource{URL: "https://git.example.com/web.git"},
			Previews: &vidrav1alpha1.Previews{Refs: []string{"refs/heads/preview/*"}},
		},
	}
	if err := hub.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), gs) })
	gs.Status.Previews = []vidrav1alpha1.RefPreview{{
		Ref: "refs/heads/preview/x", Revision: rev, ComputedAt: &computed,
		Clusters: 2, Changed: 1, Refused: 1, Added: 1, Updated: 1, Digest: digest,
	}}
	if err := hub.Status().Update(ctx, gs); err != nil {
		t.Fatal(err)
	}

	kubeconfig := "--kubeconfig=" + hubKubeconfig(t)
	out, _, err := runPlugin(t, "preview", "gitsync/webpreviews", "--ref", "preview/x", "--content-namespace", ns, kubeconfig)
	var exit exitError
	if !errors.As(err, &exit) || exit.code != 2 {
		t.Fatalf("a preview a cluster refuses: %v, want exit code 2\n%s", err, out)
	}
	for _, want := range []string{
		"GitSync webpreviews, refs/heads/preview/x at " + rev + ": 1 of 2 clusters change: +1 ~1 -0, 1 refuse it",
		"vidraresource/web-edge-lyon (cluster edge-lyon), revision " + rev + ": 1 to create, 1 to update, 0 to prune, 2 unchanged",
		"+ create ConfigMap web/added", "    +  value: v2",
		"vidraresource/web-edge-paris (cluster edge-paris): no preview: the cluster's delivery policy refuses namespace web",
		"cluster edge-nice: not previewed: the cluster pulls its bundles",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("preview does not say %q:\n%s", want, out)
		}
	}
	_, errOut, err := runPlugin(t, "preview", "gs/webpreviews", "--ref", "refs/pull/9/head", kubeconfig)
	if !errors.As(err, &exit) || exit.code != 2 || !strings.Contains(errOut, "has no preview of refs/pull/9/head (previewed: refs/heads/preview/x") {
		t.Errorf("a ref not previewed: %v\n%s", err, errOut)
	}
}
