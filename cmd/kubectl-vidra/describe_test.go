package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// recordEvent writes an events.k8s.io/v1 Event as the operator's recorder does: in
// "default", since a VidraResource is cluster-scoped.
func recordEvent(t *testing.T, name string, regarding corev1.ObjectReference, eventType, reason, note string, at time.Time, count int32) {
	t.Helper()
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NewMicroTime(at),
		ReportingController: "vidra",
		ReportingInstance:   "vidra-hub",
		Action:              "Reconcile",
		Type:                eventType,
		Reason:              reason,
		Note:                note,
		Regarding:           regarding,
	}
	if count > 1 {
		e.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(at.Add(4 * time.Minute))}
	}
	if err := fleet.Hub.Client.Create(context.Background(), e); err != nil {
		t.Fatalf("create Event %s: %v", name, err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), e) })
}

func TestDescribeShowsWhereABundleGoesItsConditionsObjectsAndEvents(t *testing.T) {
	vr := createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Labels: map[string]string{vidrav1alpha1.InfrahubSyncLabel: "webserver"},
			Annotations: map[string]string{vidrav1alpha1.BundleVariablesAnnotation: `{"cluster.labels.ring":"blue","password":"<Secret pb>","region":"eu-west"}`}},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Destination: vidrav1alpha1.Destination{Cluster: "edge-paris", Namespace: "hello", ReconcileOnEvents: true},
			DependsOn:   []vidrav1alpha1.SyncReference{{Kind: "HelmSync", Name: "ingress"}},
		},
		Status: vidrav1alpha1.VidraResourceStatus{
			ObservedGeneration: 1,
			Cluster:            "edge-paris",
			DeployState:        vidrav1alpha1.StateFailed,
			LastError:          "apply ConfigMap hello/greeting: conflict: field .data.text is declared differently by hub/other, which applied it first",
			ResourceCount:      2,
			ManagedResources: []vidrav1alpha1.ManagedResource{
				{Kind: "Namespace", APIVersion: "v1", Name: "hello"},
				{Kind: "ConfigMap", APIVersion: "v1", Name: "greeting", Namespace: "hello", Status: "InProgress", Message: "waiting for the member"},
			},
			Conditions: conditions(
				metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: vidrav1alpha1.ReasonConflict, Message: "field .data.text of ConfigMap hello/greeting is hub/other's"},
				metav1.Condition{Type: vidrav1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: vidrav1alpha1.ReasonConflict, Message: "waiting"},
			),
			VMRollout: &vidrav1alpha1.VMRolloutStatus{Phase: vidrav1alpha1.VMRolloutPaused, Total: 4, Updated: 2, Pending: 1, Failed: 1},
		},
	})
	regarding := corev1.ObjectReference{APIVersion: "infrahub.operators.com/v1alpha1", Kind: "VidraResource", Name: "hello", UID: vr.UID}
	now := time.Now()
	// Written newest first: describe must sort them.
	recordEvent(t, "hello.applied", regarding, corev1.EventTypeNormal, "Applied", "applied 2 objects to edge-paris", now.Add(-30*time.Second), 0)
	recordEvent(t, "hello.conflict", regarding, corev1.EventTypeWarning, "Conflict", "field .data.text of ConfigMap hello/greeting is hub/other's", now.Add(-10*time.Minute), 3)
	// Not about this VidraResource: another kind of the same name, and an earlier
	// VidraResource that had this name.
	recordEvent(t, "hello.sync", corev1.ObjectReference{Kind: "InfrahubSync", Name: "hello", APIVersion: "infrahub.operators.com/v1alpha1"},
		corev1.EventTypeNormal, "Synced", "NOT-THIS-SYNC", now, 0)
	recordEvent(t, "hello.old", corev1.ObjectReference{Kind: "VidraResource", Name: "hello", UID: types.UID("an-earlier-one"), APIVersion: "infrahub.operators.com/v1alpha1"},
		corev1.EventTypeWarning, "Gone", "NOT-THIS-INCARNATION", now, 0)

	out, stderr, err := runPlugin(t, "describe", "hello", "--kubeconfig", hubKubeconfig(t))
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, stderr)
	}
	defer func() {
		if t.Failed() {
			t.Log("describe printed:\n" + out)
		}
	}()
	for _, want := range []string{
		"Name:", "hello",
		"Labels:", "vidra.infrahub.operators.com/infrahubsync=webserver",
		"Sync:", "InfrahubSync webserver",
		"Destination:", "Cluster:", "edge-paris", "Namespace:", "Reconcile on events:", "true",
		"State:", "Failed",
		"Last error:", "which applied it first", // whole, not cut as in get
		"Conditions:",
		"Ready", "False", "Conflict", "field .data.text of ConfigMap hello/greeting is hub/other's",
		"Stalled",
		"Depends on:", "HelmSync ingress",
		"Variables:", "cluster.labels.ring", "<Secret pb>", "eu-west",
		"VM rollout:", "Paused, 2/4 updated, 1 pending, 0 unavailable, 1 failed",
		"Objects (2):", "Namespace", "ConfigMap", "hello/greeting", "InProgress", "waiting for the member", "Unknown",
		"Events:",
		"Warning", "Conflict", "(x3 over 10m)",
		"Normal", "Applied", "applied 2 objects to edge-paris",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe does not show %q", want)
		}
	}
	for _, unwanted := range []string{"NOT-THIS-SYNC", "NOT-THIS-INCARNATION"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("describe shows an Event about another object: %q", unwanted)
		}
	}
	// Newest last: the conflict (last seen 6m ago) comes before the apply (30s ago).
	if c, a := strings.Index(out, "hub/other's\n"), strings.Index(out, "applied 2 objects"); c < 0 || a < c {
		t.Errorf("events are not oldest first")
	}
	// The object lines read "KIND  NAMESPACE/NAME  API VERSION  STATUS  MESSAGE".
	if !containsLine(out, "ConfigMap", "hello/greeting", "v1", "InProgress", "waiting", "for", "the", "member") || !containsLine(out, "Namespace", "hello", "v1", "Unknown") {
		t.Errorf("objects are not listed as kind, namespace/name, version and status")
	}
}

func TestDescribeOfAnUnknownBundleSaysSo(t *testing.T) {
	_, _, err := runPlugin(t, "describe", "no-such-bundle", "--kubeconfig", hubKubeconfig(t))
	if err == nil || !strings.Contains(err.Error(), `VidraResource "no-such-bundle" not found`) {
		t.Fatalf("got %v, want a not found error naming the bundle", err)
	}
}

// containsLine reports whether a line of out holds exactly these fields.
func containsLine(out string, fields ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		if slices.EqualFunc(strings.Fields(line), fields, func(got, want string) bool { return want == anyField || got == want }) {
			return true
		}
	}
	return false
}

// anyField matches any one field in containsLine: for columns such as an age, which
// depend on when the test runs.
const anyField = "*"

// A bundle held back by its sync's dependsOn says what it waits for on its cluster.
func TestDescribeSaysWhatABundleWaitsFor(t *testing.T) {
	createResource(t, &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "app-edge-paris", Labels: map[string]string{vidrav1alpha1.GitSyncLabel: "app"}},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Destination: vidrav1alpha1.Destination{Cluster: "edge-paris", Namespace: "app"},
			DependsOn:   []vidrav1alpha1.SyncReference{{Kind: "HelmSync", Name: "ingress"}, {Kind: "GitSync", Name: "crds"}},
		},
		Status: vidrav1alpha1.VidraResourceStatus{
			Conditions: conditions(metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: vidrav1alpha1.ReasonDependencyNotReady,
				Message: "waiting for HelmSync ingress on edge-paris: Deployment ingress/controller 0/1"}),
		},
	})
	out, stderr, err := runPlugin(t, "describe", "app-edge-paris", "--kubeconfig", hubKubeconfig(t))
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, stderr)
	}
	if !containsLine(out, "Depends", "on:", "HelmSync", "ingress,", "GitSync", "crds") ||
		!containsLine(out, "Waiting:", "waiting", "for", "HelmSync", "ingress", "on", "edge-paris:", "Deployment", "ingress/controller", "0/1") ||
		!containsLine(out, "Variables:", "<none>") {
		t.Errorf("describe printed:\n%s", out)
	}
}
