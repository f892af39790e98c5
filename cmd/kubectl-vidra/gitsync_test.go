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

// Two commits of the GitSync "site", as the operator would record them.
var siteCommits = []string{
	"main@sha1:1111111111111111111111111111111111111111",
	"main@sha1:2222222222222222222222222222222222222222",
}

// gitSyncWithHistory writes what the operator would: a GitSync with a progressive
// rollout at revision 2 (the second commit), and its VidraResource for edge-lyon with a
// revision kept of each commit.
func gitSyncWithHistory(t *testing.T) (*vidrav1alpha1.GitSync, *vidrav1alpha1.VidraResource, []string) {
	t.Helper()
	ctx := context.Background()
	hub := fleet.Hub.Client
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: revisionsNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gs := &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Spec: vidrav1alpha1.GitSyncSpec{
			Source:      vidrav1alpha1.GitSource{URL: "https://git.example.com/site.git"},
			SyncOptions: vidrav1alpha1.SyncOptions{Rollout: &vidrav1alpha1.RolloutSpec{Strategy: vidrav1alpha1.RolloutProgressive}},
		},
	}
	if err := hub.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), gs) })
	gs.Status.Source = &vidrav1alpha1.SourceStatus{Revision: siteCommits[1]}
	gs.Status.Rollout = &vidrav1alpha1.RolloutStatus{Revision: 2, Phase: vidrav1alpha1.RolloutProgressing, Wave: "canary", Updated: 1, Total: 1}
	if err := hub.Status().Update(ctx, gs); err != nil {
		t.Fatal(err)
	}

	manifests := []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site}\ndata: {value: v1}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site}\ndata: {value: v2}\n",
	}
	vr := createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "site-edge-lyon",
			Labels: map[string]string{vidrav1alpha1.GitSyncLabel: "site"},
			Annotations: map[string]string{
				vidrav1alpha1.SyncRevisionAnnotation: "2", vidrav1alpha1.BundleIDAnnotation: "bundle",
				vidrav1alpha1.BundleRevisionAnnotation: siteCommits[1], vidrav1alpha1.BundleChecksumAnnotation: "sum2",
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(gs, vidrav1alpha1.GroupVersion.WithKind("GitSync"))},
		},
		Spec: vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-lyon"}, Manifest: manifests[1]},
		Status: vidrav1alpha1.VidraResourceStatus{Cluster: "edge-lyon", Conditions: conditions(
			metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: vidrav1alpha1.ReasonSucceeded, Message: "applied"},
		)},
	})
	h := &history.History{Client: hub, Reader: hub, Namespace: revisionsNamespace}
	for i, m := range manifests {
		// The source as the VidraResource controller records it, from the annotations.
		at := vr.DeepCopy()
		at.Annotations[vidrav1alpha1.BundleRevisionAnnotation] = siteCommits[i]
		at.Annotations[vidrav1alpha1.BundleChecksumAnnotation] = "sum" + string(rune('1'+i))
		if _, err := h.Record(ctx, vr, history.Entry{
			Body: history.Body{Manifest: m}, Digest: content.Digest([]byte(m)), Source: history.SyncSource(at),
			SyncRevision: string(rune('1' + i)), Checksum: at.Annotations[vidrav1alpha1.BundleChecksumAnnotation], PreviousResult: "Ready", Limit: 10,
		}); err != nil {
			t.Fatal(err)
		}
	}
	return gs, vr, manifests
}

// A GitSync is shown and driven as an InfrahubSync is: its history names the commit of
// each revision, rollback pins its VidraResources to an earlier commit, and rollout
// status, pause and resume take gitsync/NAME, gs/NAME or a bare NAME.
func TestAGitSyncHasAHistoryOfCommitsAndARollout(t *testing.T) {
	ctx := context.Background()
	gs, vr, manifests := gitSyncWithHistory(t)
	kubeconfig := "--kubeconfig=" + hubKubeconfig(t)

	out, _, err := runPlugin(t, "history", "gitsync/site", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "GitSync site: revision 2, Progressing; source at "+siteCommits[1]) ||
		!containsLine(out, "1", anyField, siteCommits[0], "sum1", "1", "Ready") ||
		!containsLine(out, "2", anyField, siteCommits[1], "sum2", "1", "Ready") {
		t.Errorf("history of the GitSync:\n%s", out)
	}
	out, _, err = runPlugin(t, "history", vr.Name, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "GitSync site: bundle "+siteCommits[0]+", checksum sum1") {
		t.Errorf("history of the VidraResource does not name the first commit:\n%s", out)
	}

	out, _, err = runPlugin(t, "rollback", "gs/site", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "rolled back to revision 1 ("+siteCommits[0]+")") ||
		!strings.Contains(out, "GitSync site: 1 VidraResources rolled back to its revision 1 and pinned until 'kubectl vidra rollout resume gs/site'") {
		t.Errorf("rollback of the GitSync:\n%s", out)
	}
	got := &vidrav1alpha1.VidraResource{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(vr), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Manifest != manifests[0] || got.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "1" ||
		got.Annotations[vidrav1alpha1.BundleRevisionAnnotation] != siteCommits[0] || got.Annotations[vidrav1alpha1.SyncRevisionAnnotation] != "1" {
		t.Fatalf("after rollback: manifest %q, annotations %v; want the first commit's, pinned", got.Spec.Manifest, got.Annotations)
	}

	// A bare name is a GitSync when no InfrahubSync has it. The rollback changed the
	// VidraResource's spec, which the operator (not running here) has not judged yet.
	out, _, err = runPlugin(t, "rollout", "status", "site", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "GitSync site (Progressive): revision 2 Progressing at wave canary, 1 of 1 clusters updated; source at "+siteCommits[1]) ||
		!containsLine(out, "edge-lyon", vr.Name, "1", siteCommits[0], "Unknown", "1") {
		t.Errorf("rollout status:\n%s", out)
	}
	if out, _, err = runPlugin(t, "rollout", "pause", "gitsync/site", kubeconfig); err != nil || !strings.Contains(out, "gitsync/site rollout paused") {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(gs), gs); err != nil || !gs.Spec.Rollout.Paused {
		t.Fatalf("after pause: paused %v, %v", gs.Spec.Rollout.Paused, err)
	}
	out, _, err = runPlugin(t, "rollout", "resume", "gs/site", kubeconfig)
	if err != nil || !strings.Contains(out, "gitsync/site rollout resumed; 1 pinned VidraResources follow it again") {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(gs), gs); err != nil || gs.Spec.Rollout.Paused || gs.Annotations[vidrav1alpha1.ResumeRequestedAtAnnotation] == "" {
		t.Fatalf("after resume: paused %v, resume requested %q, %v", gs.Spec.Rollout.Paused, gs.Annotations[vidrav1alpha1.ResumeRequestedAtAnnotation], err)
	}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(vr), got); err != nil || got.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
		t.Fatalf("after resume the VidraResource is still pinned: %v", err)
	}

	// diff of the GitSync previews each of its VidraResources; an OCISync of that name
	// does not exist.
	out, _, err = runPlugin(t, "diff", "gitsync/site", kubeconfig)
	if err != nil || !strings.Contains(out, "vidraresource/"+vr.Name+" (cluster edge-lyon): no preview") {
		t.Errorf("diff of the GitSync: %v\n%s", err, out)
	}
	_, stderr, err := runPlugin(t, "diff", "ocisync/site", kubeconfig)
	var exit exitError
	if !errors.As(err, &exit) || exit.code != 2 || !strings.Contains(stderr, "get OCISync site") {
		t.Errorf("diff of a missing OCISync: %v, stderr %q", err, stderr)
	}
}
