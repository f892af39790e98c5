package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

const revisionsNamespace = "vidra-system"

// syncWithHistory writes what the operator would: an InfrahubSync with a progressive
// rollout at revision 2, and its VidraResource for edge-paris with two kept revisions.
func syncWithHistory(t *testing.T) (*vidrav1alpha1.InfrahubSync, *vidrav1alpha1.VidraResource, []string) {
	t.Helper()
	ctx := context.Background()
	hub := fleet.Hub.Client
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: revisionsNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ihs := &vidrav1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source:  vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub.example.com", ArtefactName: "web"},
			Rollout: &vidrav1alpha1.RolloutSpec{Strategy: vidrav1alpha1.RolloutProgressive},
		},
	}
	if err := hub.Create(ctx, ihs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), ihs) })
	ihs.Status.Rollout = &vidrav1alpha1.RolloutStatus{Revision: 2, Phase: vidrav1alpha1.RolloutFailed, Wave: "canary", Updated: 0, Total: 1,
		FailedClusters: []string{"edge-paris"}, Message: "revision 2: wave canary: not healthy within 10m0s"}
	if err := hub.Status().Update(ctx, ihs); err != nil {
		t.Fatal(err)
	}

	manifests := []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {value: v1}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {value: v2}\n",
	}
	vr := createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "web-edge-paris",
			Labels:          map[string]string{vidrav1alpha1.InfrahubSyncLabel: "web"},
			Annotations:     map[string]string{vidrav1alpha1.SyncRevisionAnnotation: "2"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ihs, vidrav1alpha1.GroupVersion.WithKind("InfrahubSync"))},
		},
		Spec: vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-paris"}, Manifest: manifests[1]},
		// The operator has not looked at it since it was made: its Ready is for generation 0.
		Status: vidrav1alpha1.VidraResourceStatus{Cluster: "edge-paris", Conditions: conditions(
			metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Progressing", Message: "waiting for Deployment web"},
		)},
	})
	h := &history.History{Client: hub, Reader: hub, Namespace: revisionsNamespace}
	for i, m := range manifests {
		if _, err := h.Record(ctx, vr, history.Entry{
			Body: history.Body{Manifest: m}, Digest: content.Digest([]byte(m)), Source: "InfrahubSync web: artifact a1, checksum sum" + string(rune('1'+i)),
			SyncRevision: string(rune('1' + i)), PreviousResult: "Ready", Limit: 10,
		}); err != nil {
			t.Fatal(err)
		}
	}
	return ihs, vr, manifests
}

// history lists a VidraResource's revisions and its sync's; rollback writes the chosen one
// back and pins it; rollout status shows it; pause and resume drive the rollout and resume
// releases the pin.
func TestHistoryRollbackAndRolloutCommands(t *testing.T) {
	ctx := context.Background()
	ihs, vr, manifests := syncWithHistory(t)
	kubeconfig := "--kubeconfig=" + hubKubeconfig(t)

	out, _, err := runPlugin(t, "history", vr.Name, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !containsLine(out, "1", anyField, "e5b4a18ba94f", "InfrahubSync", "web:", "artifact", "a1,", "checksum", "sum1", "Ready") ||
		!containsLine(out, "2", anyField, "f6bc0072195d", "InfrahubSync", "web:", "artifact", "a1,", "checksum", "sum2", "Progressing", "(current)") {
		t.Errorf("history of the VidraResource:\n%s", out)
	}
	out, _, err = runPlugin(t, "history", "ihs/web", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "revision 2, Failed") || !containsLine(out, "1", anyField, "sum1", "1", "Ready") || !containsLine(out, "2", anyField, "sum2", "1", "Progressing") {
		t.Errorf("history of the sync:\n%s", out)
	}

	out, _, err = runPlugin(t, "rollback", "ihs/web", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1 VidraResources rolled back to its revision 1") {
		t.Errorf("rollback of the sync:\n%s", out)
	}
	got := &vidrav1alpha1.VidraResource{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(vr), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Manifest != manifests[0] || got.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "1" {
		t.Fatalf("after rollback: manifest %q, pinned %q; want revision 1, pinned", got.Spec.Manifest, got.Annotations[vidrav1alpha1.PinnedRevisionAnnotation])
	}

	out, _, err = runPlugin(t, "rollout", "status", "web", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "revision 2 Failed at wave canary, 0 of 1 clusters updated") || !strings.Contains(out, "Failed clusters: edge-paris") ||
		!containsLine(out, "edge-paris", vr.Name, "1", "Unknown", "1") {
		t.Errorf("rollout status:\n%s", out)
	}

	if _, _, err := runPlugin(t, "rollout", "pause", "web", kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(ihs), ihs); err != nil || !ihs.Spec.Rollout.Paused {
		t.Fatalf("after pause: paused %v, %v", ihs.Spec.Rollout.Paused, err)
	}
	out, _, err = runPlugin(t, "rollout", "resume", "web", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1 pinned VidraResources follow it again") {
		t.Errorf("resume:\n%s", out)
	}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(ihs), ihs); err != nil || ihs.Spec.Rollout.Paused || ihs.Annotations[vidrav1alpha1.ResumeRequestedAtAnnotation] == "" {
		t.Fatalf("after resume: paused %v, resume requested %q, %v", ihs.Spec.Rollout.Paused, ihs.Annotations[vidrav1alpha1.ResumeRequestedAtAnnotation], err)
	}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(vr), got); err != nil || got.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
		t.Fatalf("after resume the VidraResource is still pinned: %v", err)
	}

	// A revision that was not kept is refused by name.
	if _, _, err := runPlugin(t, "rollback", vr.Name, "--to-revision=7", kubeconfig); err == nil || !strings.Contains(err.Error(), "has no revision 7") {
		t.Errorf("rollback to an unknown revision: %v", err)
	}
}

// diff prints the preview the operator computed and exits 1 when it would change
// something, 0 when not, as kubectl diff does.
func TestDiffPrintsThePreviewAndExitsOneOnChanges(t *testing.T) {
	kubeconfig := "--kubeconfig=" + hubKubeconfig(t)
	computed := metav1.Now()
	withPreview := createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "previewed"},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-lyon"}},
		Status: vidrav1alpha1.VidraResourceStatus{Cluster: "edge-lyon", Preview: &vidrav1alpha1.PreviewStatus{
			Digest: "sha256:" + strings.Repeat("a", 64), Revision: "4", ObservedGeneration: 1, ComputedAt: &computed, Create: 1, Update: 1, Unchanged: 3,
			Changes: []vidrav1alpha1.PreviewChange{
				{Action: vidrav1alpha1.PreviewCreate, APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "api"},
				{Action: vidrav1alpha1.PreviewUpdate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", Name: "settings", Diff: "--- live\n+++ preview\n-  value: v1\n+  value: v2\n"},
			},
		}},
	})
	out, _, err := runPlugin(t, "diff", withPreview.Name, kubeconfig)
	var exit exitError
	if !errors.As(err, &exit) || exit.code != 1 {
		t.Fatalf("diff with changes: %v, want exit code 1", err)
	}
	for _, want := range []string{
		"vidraresource/previewed (cluster edge-lyon), revision 4: 1 to create, 1 to update, 0 to prune, 3 unchanged",
		"+ create Deployment web/api", "~ update ConfigMap web/settings", "    +  value: v2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff does not say %q:\n%s", want, out)
		}
	}

	plain := createResource(t, &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "not-previewed"}})
	out, _, err = runPlugin(t, "diff", plain.Name, kubeconfig)
	if err != nil || !strings.Contains(out, "no preview") {
		t.Fatalf("diff without a preview: %v\n%s", err, out)
	}
	if _, _, err := runPlugin(t, "diff", "nothing-of-that-name", kubeconfig); err == nil {
		t.Fatal("diff of an unknown name succeeded")
	} else if !errors.As(err, &exit) || exit.code != 2 {
		t.Fatalf("diff of an unknown name: %v, want exit code 2", err)
	}
}
