package vidraresource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

func TestInvalidManifestStallsNamingTheDocument(t *testing.T) {
	deliver(t, "broken-yaml", vidrav1alpha1.Destination{Cluster: fleet.Members[0].Name},
		cmManifest("fine")+"---\napiVersion: v1\nkind: [ConfigMap\n")
	vr := condition(t, "broken-yaml", vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonInvalidManifest)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionStalled); !strings.Contains(msg, "document[1]") {
		t.Errorf("Stalled message %q does not name document[1]", msg)
	}
	if exists(t, fleet.Members[0], &corev1.ConfigMap{}, "default", "fine") {
		t.Error("part of a broken bundle was applied")
	}
	if vr.Status.DeployState != vidrav1alpha1.StateFailed || vr.Status.LastError == "" {
		t.Errorf("DeployState %q lastError %q", vr.Status.DeployState, vr.Status.LastError)
	}
}

func TestUnknownKindIsReportedByName(t *testing.T) {
	deliver(t, "unknown-kind", vidrav1alpha1.Destination{Cluster: fleet.Members[0].Name},
		"apiVersion: example.com/v1\nkind: Doohickey\nmetadata: {name: d, namespace: default}\n")
	vr := condition(t, "unknown-kind", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonApplyFailed)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionReady); !strings.Contains(msg, "Doohickey") {
		t.Errorf("message %q does not name the kind", msg)
	}
}

func TestExistingUnmanagedObjectIsLeftAloneAndReported(t *testing.T) {
	member := fleet.Members[0]
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-ours", Namespace: "default"}, Data: map[string]string{"k": "theirs"}}
	if err := member.Client.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	deliver(t, "grabby", vidrav1alpha1.Destination{Cluster: member.Name}, cmManifest("not-ours"))
	vr := condition(t, "grabby", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonConflict)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionReady); !strings.Contains(msg, "not-ours") || !strings.Contains(msg, "adoptExisting") {
		t.Errorf("message %q", msg)
	}
	cm := &corev1.ConfigMap{}
	if exists(t, member, cm, "default", "not-ours"); cm.Data["k"] != "theirs" || cm.Labels[vidrav1alpha1.ManagedByLabel] != "" {
		t.Errorf("an unmanaged object was changed: %v %v", cm.Data, cm.Labels)
	}
	remove(t, "grabby")
	if !exists(t, member, cm, "default", "not-ours") {
		t.Error("deleting the VidraResource deleted an object it never owned")
	}
}

func TestConflictingSharedFieldIsReportedWithoutFlipFlop(t *testing.T) {
	member := fleet.Members[1]
	paint := func(color string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: paint, namespace: default}\ndata: {color: " + color + "}\n"
	}
	deliver(t, "red", vidrav1alpha1.Destination{Cluster: member.Name}, paint("red"))
	ready(t, "red")
	deliver(t, "blue", vidrav1alpha1.Destination{Cluster: member.Name}, paint("blue"))
	vr := condition(t, "blue", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonConflict)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionReady); !strings.Contains(msg, "ConfigMap default/paint") || !strings.Contains(msg, ".data.color") {
		t.Errorf("message %q does not name the object and the field", msg)
	}
	// The owner whose value is in effect reports the conflict too.
	red := condition(t, "red", vidrav1alpha1.ConditionConflict, metav1.ConditionTrue, vidrav1alpha1.ReasonConflict)
	if msg := conditionMessage(red, vidrav1alpha1.ConditionConflict); !strings.Contains(msg, "blue") || !strings.Contains(msg, ".data.color") {
		t.Errorf("red's Conflict message %q does not name the other owner and the field", msg)
	}
	if c := conditionMessage(red, vidrav1alpha1.ConditionReady); c == "" {
		t.Error("red has no Ready condition")
	}
	cm := &corev1.ConfigMap{}
	if exists(t, member, cm, "default", "paint"); cm.Data["color"] != "red" {
		t.Errorf("color = %q: the second owner won", cm.Data["color"])
	}
	// When blue goes, red no longer reports a conflict.
	remove(t, "blue")
	testfleet.Eventually(t, 10*time.Second, "red's conflict cleared", func() (bool, error) {
		vr := &vidrav1alpha1.VidraResource{}
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: "red"}, vr)
		return err == nil && meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionConflict) == nil, err
	})
}

func TestUnenrolledDestinationIsReported(t *testing.T) {
	deliver(t, "nowhere", vidrav1alpha1.Destination{Cluster: "not-enrolled"}, cmManifest("x"))
	vr := condition(t, "nowhere", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonClusterNotFound)
	if msg := conditionMessage(vr, vidrav1alpha1.ConditionReady); !strings.Contains(msg, "not-enrolled") {
		t.Errorf("message %q does not name the cluster", msg)
	}
}

func TestSuspendedResourceAppliesNothing(t *testing.T) {
	deliver(t, "paused", vidrav1alpha1.Destination{Cluster: fleet.Members[0].Name}, cmManifest("paused"),
		func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Suspend = true })
	condition(t, "paused", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended)
	if exists(t, fleet.Members[0], &corev1.ConfigMap{}, "default", "paused") {
		t.Error("a suspended VidraResource applied its bundle")
	}
	updateSpec(t, "paused", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Suspend = false })
	ready(t, "paused")
}
