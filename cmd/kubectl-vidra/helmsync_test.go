package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

// A HelmSync is named hs/NAME or helmsync/NAME by every command that takes a sync, as the
// other kinds are: its history names the chart version of each revision, rollout status
// shows it, and get -o wide names it in the SYNC column.
func TestAHelmSyncIsShownByItsShortNameWithItsChartVersions(t *testing.T) {
	ctx := context.Background()
	hub := fleet.Hub.Client
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: revisionsNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	versions := []string{"1.4.0", "1.5.0"}
	hs := &vidrav1alpha1.HelmSync{
		ObjectMeta: metav1.ObjectMeta{Name: "ingress"},
		Spec: vidrav1alpha1.HelmSyncSpec{
			Source: vidrav1alpha1.HelmSource{RepoURL: "https://charts.example.com/stable", Chart: "ingress"},
			// Suspended: no operator runs here, and none should fetch the made-up chart.
			SyncOptions: vidrav1alpha1.SyncOptions{Suspend: true, Rollout: &vidrav1alpha1.RolloutSpec{Strategy: vidrav1alpha1.RolloutProgressive}},
		},
	}
	if err := hub.Create(ctx, hs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), hs) })
	hs.Status.Source = &vidrav1alpha1.SourceStatus{Revision: versions[1]}
	hs.Status.Rollout = &vidrav1alpha1.RolloutStatus{Revision: 2, Phase: vidrav1alpha1.RolloutCompleted, Updated: 1, Total: 1}
	if err := hub.Status().Update(ctx, hs); err != nil {
		t.Fatal(err)
	}
	manifests := []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ingress}\ndata: {chart: 1.4.0}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ingress}\ndata: {chart: 1.5.0}\n",
	}
	vr := createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "ingress-edge-nice",
			Labels: map[string]string{vidrav1alpha1.HelmSyncLabel: "ingress"},
			Annotations: map[string]string{
				vidrav1alpha1.SyncRevisionAnnotation: "2", vidrav1alpha1.BundleIDAnnotation: "helmsync/edge-nice",
				vidrav1alpha1.BundleRevisionAnnotation: versions[1], vidrav1alpha1.BundleChecksumAnnotation: "helm2",
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(hs, vidrav1alpha1.GroupVersion.WithKind("HelmSync"))},
		},
		Spec: vidrav1alpha1.VidraResourceSpec{Destination: vidrav1alpha1.Destination{Cluster: "edge-nice"}, Manifest: manifests[1]},
		Status: vidrav1alpha1.VidraResourceStatus{Cluster: "edge-nice", Conditions: conditions(
			metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: vidrav1alpha1.ReasonSucceeded, Message: "applied"},
		)},
	})
	h := &history.History{Client: hub, Reader: hub, Namespace: revisionsNamespace}
	for i, m := range manifests {
		at := vr.DeepCopy()
		at.Annotations[vidrav1alpha1.BundleRevisionAnnotation] = versions[i]
		at.Annotations[vidrav1alpha1.BundleChecksumAnnotation] = "helm" + string(rune('1'+i))
		if _, err := h.Record(ctx, vr, history.Entry{
			Body: history.Body{Manifest: m}, Digest: content.Digest([]byte(m)), Source: history.SyncSource(at),
			SyncRevision: string(rune('1' + i)), Checksum: at.Annotations[vidrav1alpha1.BundleChecksumAnnotation], PreviousResult: "Ready", Limit: 10,
		}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := "--kubeconfig=" + hubKubeconfig(t)

	for _, name := range []string{"hs/ingress", "helmsync/ingress"} {
		out, _, err := runPlugin(t, "history", name, kubeconfig)
		if err != nil {
			t.Fatalf("history %s: %v", name, err)
		}
		if !strings.Contains(out, "HelmSync ingress: revision 2, Completed; source at "+versions[1]) ||
			!containsLine(out, "1", anyField, versions[0], "helm1", "1", "Ready") ||
			!containsLine(out, "2", anyField, versions[1], "helm2", "1", "Ready") {
			t.Errorf("history %s does not name the chart version of each revision:\n%s", name, out)
		}
	}
	out, _, err := runPlugin(t, "rollout", "status", "hs/ingress", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "HelmSync ingress (Progressive): revision 2 Completed") || !containsLine(out, "edge-nice", vr.Name, "2", versions[1], anyField, "<none>") {
		t.Errorf("rollout status of the HelmSync:\n%s", out)
	}
	out, _, err = runPlugin(t, "get", "-o", "wide", "--cluster", "edge-nice", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	tb := parseTable(t, out, "NAME", "CLUSTER", "STATE", "OBJECTS", "READY", "AGE", "VM ROLLOUT", "SYNC", "LAST ERROR")
	tb.expectRow(t, vr.Name, map[string]string{"CLUSTER": "edge-nice", "SYNC": "hs/ingress"})
}
