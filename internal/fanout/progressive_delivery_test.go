package fanout_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// inWaves fans out to the clusters of a suite, canary ring first, then prod, one
// cluster at a time; a cluster has a minute to become healthy.
func inWaves(suite string) vidrav1alpha1.SyncOptions {
	one := intstr.FromInt32(1)
	opts := selecting(map[string]string{"suite": suite})
	opts.Rollout = &vidrav1alpha1.RolloutSpec{
		Strategy: vidrav1alpha1.RolloutProgressive,
		Waves: []vidrav1alpha1.RolloutWave{
			{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}},
			{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "prod"}}},
		},
		MaxUnavailable: &one,
		HealthTimeout:  &metav1.Duration{Duration: time.Minute},
		OnFailure:      vidrav1alpha1.RolloutFailurePause,
	}
	return opts
}

// reportAll reports every VidraResource of the sync Ready for its spec.
func (h *harness) reportAll() {
	h.t.Helper()
	for _, vr := range resourcesOf(h.t, h.sync) {
		report(h.t, vr.Name, true)
	}
}

// nameOn is the name of the sync's VidraResource of item id on cluster.
func (h *harness) nameOn(id, cluster string) string {
	h.t.Helper()
	for _, vr := range resourcesOf(h.t, h.sync) {
		if vr.Annotations[vidrav1alpha1.BundleIDAnnotation] == id && vr.Spec.Destination.Cluster == cluster {
			return vr.Name
		}
	}
	h.t.Fatalf("no VidraResource of %s on %s", id, cluster)
	return ""
}

// rollUntilCompleted delivers round after round, every VidraResource reporting Ready between
// them, until the rollout of revision is Completed.
func (h *harness) rollUntilCompleted(items func() []fanout.Item, revision int64) {
	h.t.Helper()
	for range 6 {
		h.round(items())
		if r := h.sync.Status.Rollout; r != nil && r.Revision == revision && r.Phase == vidrav1alpha1.RolloutCompleted {
			return
		}
		h.reportAll()
	}
	h.t.Fatalf("revision %d not completed: %+v", revision, h.sync.Status.Rollout)
}

// A new revision goes to the canary wave alone; the prod wave gets it only once the
// canary is healthy; and a revision the canary cannot run past its health timeout stops
// there, the prod wave never seeing it.
func TestARolloutMovesWaveByWaveBehindTheHealthGate(t *testing.T) {
	enroll(t, "waves-canary", map[string]string{"suite": "waves", "ring": "canary"})
	enroll(t, "waves-prod", map[string]string{"suite": "waves", "ring": "prod"})
	src := newSource(map[string]string{"web": configMap("web", "v1")})
	h := newHarness(t, "waves", inWaves("waves"), src)
	items := func() []fanout.Item { return src.items("web") }
	h.rollUntilCompleted(items, 1)

	src.set("web", configMap("web", "v2"), nil)
	h.round(items())
	h.round(items()) // nothing reported: the canary is not yet healthy
	if got := h.delivered(); got["web/waves-canary"] != configMap("web", "v2") || got["web/waves-prod"] != configMap("web", "v1") {
		t.Fatalf("before the canary is healthy: canary has %q, prod %q", got["web/waves-canary"], got["web/waves-prod"])
	}
	if r := h.sync.Status.Rollout; r.Revision != 2 || r.Phase != vidrav1alpha1.RolloutProgressing || r.Wave != "canary" {
		t.Errorf("rollout %+v, want revision 2 Progressing in the canary wave", r)
	}
	prod := h.nameOn("web", "waves-prod")
	if vr := get(t, prod); vr.Spec.Preview == nil || vr.Spec.Preview.Manifest != configMap("web", "v2") {
		t.Errorf("prod's VidraResource does not show v2 waiting for it: %+v", vr.Spec.Preview)
	}
	h.rollUntilCompleted(items, 2)
	if got := h.delivered(); got["web/waves-prod"] != configMap("web", "v2") {
		t.Errorf("after the canary was healthy, prod has %q", got["web/waves-prod"])
	}

	// v3 never becomes healthy on the canary.
	src.set("web", configMap("web", "v3"), nil)
	h.round(items())
	report(t, h.nameOn("web", "waves-canary"), false)
	h.now = h.now.Add(2 * time.Minute)
	h.round(items())
	h.round(items())
	r := h.sync.Status.Rollout
	if r.Revision != 3 || r.Phase != vidrav1alpha1.RolloutFailed || len(r.FailedClusters) != 1 || r.FailedClusters[0] != "waves-canary" {
		t.Errorf("rollout %+v, want revision 3 Failed on the canary", r)
	}
	if got := h.delivered(); got["web/waves-prod"] != configMap("web", "v2") {
		t.Errorf("the prod wave has %q, want v2: it must never see a failed revision", got["web/waves-prod"])
	}
	if !strings.Contains(drain(h), vidrav1alpha1.ReasonRolloutFailed) {
		t.Error("no Event said the rollout failed")
	}
}

// A VidraResource a person rolled back keeps its content while the source has newer
// content, and the item's status says which are pinned; the others are updated.
func TestARolledBackVidraResourceKeepsItsContent(t *testing.T) {
	sel := map[string]string{"suite": "pinned"}
	enroll(t, "pinned-1", sel)
	enroll(t, "pinned-2", sel)
	src := newSource(map[string]string{"web": configMap("web", "v1")})
	h := newHarness(t, "pinned", selecting(sel), src)
	h.round(src.items("web"))

	name := h.nameOn("web", "pinned-1")
	vr := get(t, name)
	patch := client.MergeFrom(vr.DeepCopy())
	vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] = "1"
	if err := hub.Client.Patch(context.Background(), vr, patch); err != nil {
		t.Fatal(err)
	}
	src.set("web", configMap("web", "v2"), nil)
	h.round(src.items("web"))
	if got := h.delivered(); got["web/pinned-1"] != configMap("web", "v1") || got["web/pinned-2"] != configMap("web", "v2") {
		t.Errorf("pinned-1 has %q (pinned at v1), pinned-2 %q", got["web/pinned-1"], got["web/pinned-2"])
	}
	if msg := h.sync.Status.Bundles[0].Message; !strings.Contains(msg, name) || !strings.Contains(msg, "revision 1") {
		t.Errorf("the bundle's status %q does not name the pinned VidraResource", msg)
	}
}

func get(t *testing.T, name string) *vidrav1alpha1.VidraResource {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	if err := hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vr); err != nil {
		t.Fatal(err)
	}
	return vr
}

// drain is every Event recorded so far, one per line.
func drain(h *harness) string {
	var lines []string
	for {
		select {
		case e := <-h.events.Events:
			lines = append(lines, e)
		default:
			return strings.Join(lines, "\n")
		}
	}
}
