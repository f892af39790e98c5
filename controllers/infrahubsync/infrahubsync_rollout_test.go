package infrahubsync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// setRing puts a member in a ring ("" takes it out).
func setRing(t *testing.T, member, value string) {
	t.Helper()
	setClusterLabel(t, member, "ring", value)
}

// rolloutWatch follows the VidraResources of a sync through a watch on the hub, as they
// change: the order clusters received each checksum, and the most clusters of each wave
// not healthy at one moment.
type rolloutWatch struct {
	mu sync.Mutex
	// firstAt is when each cluster was first seen with each checksum.
	firstAt map[string]map[string]time.Time
	// healthyAt is when each cluster was first seen healthy with each checksum.
	healthyAt map[string]map[string]time.Time
	// maxUnhealthy is, per wave, the most clusters seen not healthy at once.
	maxUnhealthy map[string]int
	state        map[string]vidrav1alpha1.VidraResource
	// readyWith is the checksum each VidraResource was last seen Ready with.
	readyWith map[string]string
}

func watchRollout(t *testing.T, sync string, ringOf map[string]string) *rolloutWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &rolloutWatch{firstAt: map[string]map[string]time.Time{}, healthyAt: map[string]map[string]time.Time{}, maxUnhealthy: map[string]int{}, state: map[string]vidrav1alpha1.VidraResource{}, readyWith: map[string]string{}}
	hub, err := client.NewWithWatch(fleet.Hub.Config, client.Options{Scheme: fleet.Hub.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go func() {
		for ctx.Err() == nil {
			watcher, err := hub.Watch(ctx, &vidrav1alpha1.VidraResourceList{}, client.MatchingLabels{vidrav1alpha1.InfrahubSyncLabel: sync})
			if err != nil {
				return
			}
			select {
			case <-started:
			default:
				close(started)
			}
			for ev := range watcher.ResultChan() {
				if vr, ok := ev.Object.(*vidrav1alpha1.VidraResource); ok {
					w.observe(vr, ringOf, ev.Type == "DELETED")
				}
			}
		}
	}()
	<-started
	return w
}

func (w *rolloutWatch) observe(vr *vidrav1alpha1.VidraResource, ringOf map[string]string, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleted {
		delete(w.state, vr.Name)
		return
	}
	w.state[vr.Name] = *vr
	cluster, sum := vr.Spec.Destination.Cluster, vr.Annotations[vidrav1alpha1.BundleChecksumAnnotation]
	now := time.Now()
	if w.firstAt[cluster] == nil {
		w.firstAt[cluster], w.healthyAt[cluster] = map[string]time.Time{}, map[string]time.Time{}
	}
	if _, seen := w.firstAt[cluster][sum]; !seen {
		w.firstAt[cluster][sum] = now
	}
	if _, seen := w.healthyAt[cluster][sum]; !seen && isHealthy(vr) {
		w.healthyAt[cluster][sum] = now
	}
	if isHealthy(vr) {
		w.readyWith[vr.Name] = sum
	}
	// Unavailable: updating (its content not yet Ready) or not Ready.
	unhealthy := map[string]int{}
	for _, cur := range w.state {
		ready := meta.FindStatusCondition(cur.Status.Conditions, vidrav1alpha1.ConditionReady)
		updating := w.readyWith[cur.Name] != cur.Annotations[vidrav1alpha1.BundleChecksumAnnotation]
		if updating || ready == nil || ready.Status != metav1.ConditionTrue {
			unhealthy[ringOf[cur.Spec.Destination.Cluster]]++
		}
	}
	for ring, n := range unhealthy {
		w.maxUnhealthy[ring] = max(w.maxUnhealthy[ring], n)
	}
}

func isHealthy(vr *vidrav1alpha1.VidraResource) bool {
	c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	return vr.Status.ObservedGeneration == vr.Generation && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation
}

// times returns when each cluster first had checksum sum (zero when never).
func (w *rolloutWatch) times(sum string, healthy bool) map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]time.Time{}
	src := w.firstAt
	if healthy {
		src = w.healthyAt
	}
	for cluster, sums := range src {
		if t, ok := sums[sum]; ok {
			out[cluster] = t
		}
	}
	return out
}

func (w *rolloutWatch) unhealthyAtOnce(ring string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxUnhealthy[ring]
}

// waitRollout waits until the sync's rollout reaches phase for revision.
func waitRollout(t *testing.T, sync string, revision int64, phase vidrav1alpha1.RolloutPhase, within time.Duration) *vidrav1alpha1.InfrahubSync {
	t.Helper()
	var ihs *vidrav1alpha1.InfrahubSync
	testfleet.Eventually(t, within, fmt.Sprintf("rollout of revision %d of %s %s", revision, sync, phase), func() (bool, error) {
		ihs = getSync(t, sync)
		r := ihs.Status.Rollout
		return r != nil && r.Revision == revision && r.Phase == phase, nil
	})
	return ihs
}

// checksumOf is the checksum the sync holds as newest for its one artifact.
func checksumOf(ihs *vidrav1alpha1.InfrahubSync) string {
	if len(ihs.Status.Artifacts) != 1 {
		return ""
	}
	return ihs.Status.Artifacts[0].Checksum
}

// brokenArtifact is a site's artifact with a Deployment that never becomes Available:
// nothing runs pods here.
func brokenArtifact(ns, site, value string) string {
	return artifact(ns, site, value) + fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%s
  namespace: %s
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.invalid/web:1}]
`, site, ns)
}

// A progressive rollout moves each revision wave by wave, canary first, never more than
// maxUnavailable clusters of a wave unhealthy at once; a revision that cannot become
// healthy stops at the canary, which rolls back, and the prod wave never sees it.
func TestProgressiveRolloutWaveByWave(t *testing.T) {
	ctx := context.Background()
	canary, prod1, prod2 := fleet.Members[0], fleet.Members[1], fleet.Members[2]
	s := newInfrahub(t, "waves", infrahubtest.Options{})
	const ns, site = "ihs-waves", "paris"
	putSites(s, "main", ns, "v1", site)

	setRing(t, canary.Name, "canary")
	t.Cleanup(func() { setRing(t, canary.Name, "") })
	setRing(t, prod1.Name, "prod")
	t.Cleanup(func() { setRing(t, prod1.Name, "") })
	enrollment := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: prod2.Name, Namespace: namespace, Labels: map[string]string{vidrav1alpha1.ClusterLabel: prod2.Name, "ring": "prod"}},
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: prod2.Kubeconfig},
	}
	if err := fleet.Hub.Client.Create(ctx, enrollment); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), enrollment) })
	ringOf := map[string]string{canary.Name: "canary", prod1.Name: "prod", prod2.Name: "prod"}
	w := watchRollout(t, "waves", ringOf)

	one := intstr.FromInt32(1)
	newSync(t, "waves", "waves", s, vidrav1alpha1.InfrahubSyncDestination{
		Destination:     vidrav1alpha1.Destination{Namespace: ns},
		ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ring", Operator: metav1.LabelSelectorOpExists}}},
	}, func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Spec.Rollout = &vidrav1alpha1.RolloutSpec{
			Strategy: vidrav1alpha1.RolloutProgressive,
			Waves: []vidrav1alpha1.RolloutWave{
				{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}},
				{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "prod"}}},
			},
			MaxUnavailable: &one,
			HealthTimeout:  &metav1.Duration{Duration: 20 * time.Second},
			OnFailure:      vidrav1alpha1.RolloutFailureRollback,
		}
	})

	// Revisions 1 (first delivery) and 2 (a change) move canary first, one at a time.
	for _, step := range []struct {
		revision int64
		value    string
	}{{1, "v1"}, {2, "v2"}} {
		revision, value := step.revision, step.value
		if revision == 2 {
			putSites(s, "main", ns, value, site)
			requestSync(t, "waves")
		}
		ihs := waitRollout(t, "waves", revision, vidrav1alpha1.RolloutCompleted, 90*time.Second)
		sum := checksumOf(ihs)
		updated, healthyAt := w.times(sum, false), w.times(sum, true)
		for _, prod := range []string{prod1.Name, prod2.Name} {
			if updated[prod].IsZero() || !healthyAt[canary.Name].Before(updated[prod]) {
				t.Errorf("revision %d: %s got it at %v, before the canary was healthy (%v)", revision, prod, updated[prod], healthyAt[canary.Name])
			}
		}
		second, firstHealthy := updated[prod1.Name], healthyAt[prod1.Name]
		if updated[prod2.Name].After(second) {
			second = updated[prod2.Name]
		}
		if healthyAt[prod2.Name].Before(firstHealthy) {
			firstHealthy = healthyAt[prod2.Name]
		}
		if second.Before(firstHealthy) {
			t.Errorf("revision %d: both prod clusters updated before either was healthy", revision)
		}
		for _, m := range []*testfleet.Cluster{canary, prod1, prod2} {
			waitValue(t, m, ns, site, value)
		}
		if ihs.Status.Rollout.Updated != 3 || ihs.Status.Rollout.Total != 3 {
			t.Errorf("revision %d: updated %d of %d, want 3 of 3", revision, ihs.Status.Rollout.Updated, ihs.Status.Rollout.Total)
		}
		if !meta.IsStatusConditionTrue(ihs.Status.Conditions, vidrav1alpha1.ConditionRolledOut) {
			t.Errorf("revision %d: RolledOut is not True: %+v", revision, ihs.Status.Conditions)
		}
	}
	if n := w.unhealthyAtOnce("prod"); n > 1 {
		t.Errorf("%d prod clusters unhealthy at once; maxUnavailable is 1", n)
	}
	t.Logf("most clusters unhealthy at once: canary %d, prod %d", w.unhealthyAtOnce("canary"), w.unhealthyAtOnce("prod"))
	waitEvent(t, "waves", "WaveCompleted", "revision 2", "wave canary")
	waitEvent(t, "waves", "RolloutCompleted", "revision 2")
	waitEvent(t, "waves", "RolloutStarted", "revision 2", "wave canary first")
	waitEvent(t, "waves", "WaveStarted", "revision 2", "wave prod")
	if v := testfleet.MetricValue(t, registry, "vidra_rollout_waves_total", map[string]string{"result": "completed"}); v < 2 {
		t.Errorf("vidra_rollout_waves_total{result=completed} = %v, want the canary and prod waves of revision 2 at least", v)
	}

	// Revision 3 never becomes healthy: the canary fails and rolls back; prod never has it.
	good := checksumOf(getSync(t, "waves"))
	s.Put("main", infrahubtest.Artifact{
		ID: artifactName + "-" + site, Name: artifactName, Content: brokenArtifact(ns, site, "v3"),
		TargetID: "node-" + site, TargetLabel: site, TargetKind: "InfraSite", DefinitionID: "def-web", DefinitionName: "web-definition",
	})
	requestSync(t, "waves")
	waitValue(t, canary, ns, site, "v3")
	ihs := waitRollout(t, "waves", 3, vidrav1alpha1.RolloutRolledBack, 90*time.Second)
	bad := checksumOf(ihs)
	if !slices.Equal(ihs.Status.Rollout.FailedClusters, []string{canary.Name}) {
		t.Errorf("failed clusters %v, want the canary", ihs.Status.Rollout.FailedClusters)
	}
	waitValue(t, canary, ns, site, "v2")
	testfleet.Eventually(t, 30*time.Second, "the bad revision's Deployment released from the canary", func() (bool, error) {
		err := canary.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-" + site}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if got := w.times(bad, false); !got[prod1.Name].IsZero() || !got[prod2.Name].IsZero() {
		t.Errorf("the prod wave received the failed revision: %v", got)
	}
	for _, prod := range []*testfleet.Cluster{prod1, prod2} {
		if v := configMapValue(t, prod, ns, site); v != "v2" {
			t.Errorf("%s has %q, want v2 untouched", prod.Name, v)
		}
	}
	// The prod clusters, whose wave was never reached, show what revision 3 would do.
	for _, prod := range []*testfleet.Cluster{prod1, prod2} {
		testfleet.Eventually(t, 30*time.Second, "a preview of revision 3 on "+prod.Name, func() (bool, error) {
			for _, vr := range resourcesOf(t, "waves") {
				p := vr.Status.Preview
				if vr.Spec.Destination.Cluster != prod.Name || p == nil || p.Revision != "3" || p.ObservedGeneration != vr.Generation {
					continue
				}
				var update, create bool
				for _, c := range p.Changes {
					update = update || (c.Kind == "ConfigMap" && c.Action == vidrav1alpha1.PreviewUpdate && strings.Contains(c.Diff, "+  value: v3"))
					create = create || (c.Kind == "Deployment" && c.Action == vidrav1alpha1.PreviewCreate)
				}
				return update && create, nil
			}
			return false, nil
		})
	}
	waitEvent(t, "waves", "RolledBack", "revision 3", "wave canary", canary.Name)
	if v := testfleet.MetricValue(t, registry, "vidra_rollout_waves_total", map[string]string{"result": "rolledback"}); v < 1 {
		t.Errorf("vidra_rollout_waves_total{result=rolledback} = %v", v)
	}
	if ihs.Status.Artifacts[0].StableChecksum != good {
		t.Errorf("stable checksum %s, want the last completed %s", ihs.Status.Artifacts[0].StableChecksum, good)
	}

	// Later listings hold the rollback until the content changes or a person resumes.
	requestSync(t, "waves")
	waitGraphQLRequests(t, s, s.GraphQLRequests()+1)
	time.Sleep(2 * time.Second)
	if v := configMapValue(t, canary, ns, site); v != "v2" {
		t.Errorf("a later listing undid the rollback: the canary has %q", v)
	}
	if r := getSync(t, "waves").Status.Rollout; r.Phase != vidrav1alpha1.RolloutRolledBack {
		t.Errorf("phase %s after a later listing, want RolledBack", r.Phase)
	}
}

// Every delivered revision is kept; rolling a VidraResource of a sync back pins it: later
// listings, even of newer content, leave it on the revision chosen, the sync says so, and
// it follows the sync again once unpinned.
func TestRollbackIsPinnedAcrossListings(t *testing.T) {
	ctx := context.Background()
	m1 := fleet.Members[0]
	s := newInfrahub(t, "pin", infrahubtest.Options{})
	const ns, site = "ihs-pin", "lyon"
	putSites(s, "main", ns, "v1", site)
	newSync(t, "pin", "pin", s, withCluster(m1.Name))
	allReady(t, "pin", 1)
	putSites(s, "main", ns, "v2", site)
	requestSync(t, "pin")
	waitValue(t, m1, ns, site, "v2")
	vr := &allReady(t, "pin", 1)[0]

	h := &history.History{Client: fleet.Hub.Client, Reader: fleet.Hub.Client, Namespace: namespace}
	var revisions []history.Revision
	testfleet.Eventually(t, 30*time.Second, "two revisions kept", func() (bool, error) {
		var err error
		revisions, err = h.List(ctx, vr)
		return len(revisions) == 2, err
	})
	if revisions[0].SyncRevision != "1" || revisions[1].SyncRevision != "2" || revisions[0].Result != "Ready" {
		t.Fatalf("revisions %+v: want sync revisions 1 and 2, the first ended Ready", revisions)
	}
	if !strings.Contains(revisions[1].Source, "checksum "+checksumOf(getSync(t, "pin"))) {
		t.Errorf("source %q does not name the artifact's checksum", revisions[1].Source)
	}
	if vr.Status.Revision != 2 {
		t.Errorf("status.revision %d, want 2", vr.Status.Revision)
	}

	// Roll back to revision 1, as kubectl vidra rollback does.
	if err := history.Restore(ctx, fleet.Hub.Client, vr, revisions[0]); err != nil {
		t.Fatal(err)
	}
	waitValue(t, m1, ns, site, "v1")
	testfleet.Eventually(t, 30*time.Second, "Pinned condition, and the rollback numbered 3", func() (bool, error) {
		cur := resourcesOf(t, "pin")[0]
		return meta.IsStatusConditionTrue(cur.Status.Conditions, vidrav1alpha1.ConditionPinned) && cur.Status.Revision == 3, nil
	})

	// Newer content and several listings: the pin holds, and the sync says why.
	putSites(s, "main", ns, "v3", site)
	for range 3 {
		before := s.GraphQLRequests()
		requestSync(t, "pin")
		waitGraphQLRequests(t, s, before+1)
	}
	testfleet.Eventually(t, 30*time.Second, "the sync to say the VidraResource is pinned", func() (bool, error) {
		a := getSync(t, "pin").Status.Artifacts
		return len(a) == 1 && containsAll(a[0].Message, "pinned by a rollback", vr.Name, "newer content", "rollout resume pin"), nil
	})
	if v := configMapValue(t, m1, ns, site); v != "v1" {
		t.Fatalf("the pinned VidraResource delivers %q, want v1", v)
	}

	// Unpinned (kubectl vidra rollout resume), it gets the newest content.
	cur := resourcesOf(t, "pin")[0]
	base := cur.DeepCopy()
	delete(cur.Annotations, vidrav1alpha1.PinnedRevisionAnnotation)
	if err := fleet.Hub.Client.Patch(ctx, &cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	waitValue(t, m1, ns, site, "v3")
	testfleet.Eventually(t, 30*time.Second, "Pinned condition gone", func() (bool, error) {
		cur := resourcesOf(t, "pin")[0]
		return meta.FindStatusCondition(cur.Status.Conditions, vidrav1alpha1.ConditionPinned) == nil, nil
	})
}
