package sourcesync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// widgetHealth tells a Widget's health by its status.phase, which kstatus cannot read:
// without it, a Widget is Current as soon as it exists.
var widgetHealth = vidrav1alpha1.HealthCheck{
	APIVersion: "health.vidra.dev/v1", Kind: "Widget",
	InProgress: "status.?phase.orValue('') == 'Provisioning'",
	Failed:     "status.?phase.orValue('') == 'Error'",
	Current:    "status.?phase.orValue('') == 'Ready'",
}

const widget = "apiVersion: health.vidra.dev/v1\nkind: Widget\nmetadata:\n  name: web\nspec:\n  size: 1\n"

// A sync's healthCheckExprs judge the objects of their kind on each cluster: Ready where
// the expression says current, failed where it says failed, naming the cluster, the
// object and the expression; past spec.timeout an object still in progress has failed;
// an expression that does not compile stalls the sync, naming it.
func TestHealthCheckExprsJudgeTheirKindOnEachCluster(t *testing.T) {
	const ns = "gs-health"
	createNamespace(t, ns)
	first, second := fleet.Members[0], fleet.Members[1]
	for _, m := range fleet.Members {
		m.ServeKind(t, "health.vidra.dev", "Widget", apiextensionsv1.NamespaceScoped)
	}
	srv := gitserver.New(t)
	repo := srv.Repo(t, "health")
	repo.Commit(t, "main", map[string]string{"widget.yaml": widget}, "widget")
	gs := gitSync("health", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Destination = everyMember(ns)
		gs.Spec.HealthCheckExprs = []vidrav1alpha1.HealthCheck{widgetHealth}
	})
	create(t, gs)
	waitReadiness(t, gs, metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing, "Widget "+ns+"/web")
	setPhase(t, first, ns, "Ready")
	setPhase(t, second, ns, "Error")
	waitReadiness(t, gs, metav1.ConditionFalse, vidrav1alpha1.ReasonVidraResourceFailed,
		"failed on "+second.Name+": HealthCheckFailed: failed: Widget "+ns+"/web: healthCheckExprs failed \"status.?phase.orValue('') == 'Error'\" is true; Ready on 1 of 2 clusters")
	setPhase(t, second, ns, "Ready")
	waitReadiness(t, gs, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, "Ready on 2 of 2 clusters")

	// A timeout: a new Widget that no expression calls current yet has failed past it.
	repo.Commit(t, "main", map[string]string{"slow.yaml": strings.Replace(widget, "name: web", "name: slow", 1)}, "slow")
	update(t, gs, func() { gs.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Second} })
	waitReadiness(t, gs, metav1.ConditionFalse, vidrav1alpha1.ReasonVidraResourceFailed,
		"failed on "+first.Name+", "+second.Name+": HealthCheckFailed: failed: still in progress 2s after the spec was applied (spec.timeout): Widget "+ns+"/slow: no healthCheckExprs expression is true yet")

	// An expression that does not compile: the sync stalls, naming it; what it delivered
	// stays.
	update(t, gs, func() { gs.Spec.HealthCheckExprs[0].Current = "status.phase ==" })
	condition(t, gs, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonHealthCheckInvalid)
	if msg := readyMessage(gs); !containsAll(msg, "spec.healthCheckExprs[0].current (Widget health.vidra.dev/v1)", `"status.phase =="`) {
		t.Errorf("Ready says %q, want the expression named", msg)
	}
	if len(resourcesOf(t, gs)) != 2 {
		t.Error("an expression that does not compile removed what the sync delivered")
	}
}

// setPhase sets the Widget's status.phase on m, as its controller would.
func setPhase(t *testing.T, m *testfleet.Cluster, ns, phase string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("health.vidra.dev/v1")
	u.SetKind("Widget")
	testfleet.Eventually(t, 30*time.Second, "Widget "+ns+"/web on "+m.Name, func() (bool, error) {
		err := m.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, u)
		return err == nil, client.IgnoreNotFound(err)
	})
	patch := []byte(`{"status":{"phase":"` + phase + `"}}`)
	if err := m.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}
