package infrahubsync

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func twoWaves(onFailure vidrav1alpha1.RolloutFailurePolicy) vidrav1alpha1.RolloutSpec {
	mu := intstr.FromInt32(1)
	return vidrav1alpha1.RolloutSpec{
		Strategy: vidrav1alpha1.RolloutProgressive,
		Waves: []vidrav1alpha1.RolloutWave{
			{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}},
			{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "prod"}}},
		},
		MaxUnavailable: &mu,
		HealthTimeout:  &metav1.Duration{Duration: time.Minute},
		OnFailure:      onFailure,
	}
}

// fleetOf is c1 in the canary ring, p1..p3 in prod and x1 in no wave, all holding the
// stable revision.
func fleetOf() []clusterView {
	ring := func(r string) map[string]string { return map[string]string{"ring": r} }
	return []clusterView{
		{name: "c1", labels: ring("canary"), present: true},
		{name: "p1", labels: ring("prod"), present: true},
		{name: "p2", labels: ring("prod"), present: true},
		{name: "p3", labels: ring("prod"), present: true},
		{name: "x1", present: true},
	}
}

func moved(p rolloutPlan, m move) []string {
	var out []string
	for name, mv := range p.moves {
		if mv == m {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// apply plays the plan's moves on the views, as the API would show them afterwards.
func apply(clusters []clusterView, p rolloutPlan, at time.Time) {
	for i := range clusters {
		switch p.moves[clusters[i].name] {
		case toNewest:
			clusters[i].present, clusters[i].atTarget, clusters[i].healthy, clusters[i].updatedAt = true, true, false, at
		case toStable:
			clusters[i].present, clusters[i].atTarget, clusters[i].healthy = true, false, false
		}
	}
}

func healthyNow(clusters []clusterView, names ...string) {
	for i := range clusters {
		if slices.Contains(names, clusters[i].name) {
			clusters[i].healthy = true
		}
	}
}

func mustPlan(t *testing.T, in rolloutInput) rolloutPlan {
	t.Helper()
	p, err := planRollout(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A revision moves wave by wave, never more than maxUnavailable clusters of a wave
// updating at once, and the implicit wave comes last.
func TestPlanMovesWaveByWaveWithinTheBudget(t *testing.T) {
	clusters := fleetOf()
	in := rolloutInput{spec: twoWaves(vidrav1alpha1.RolloutFailurePause), hash: "h2", hasStable: true, now: t0, clusters: clusters}
	in.last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}

	var order []string
	for step := 0; step < 20; step++ {
		p := mustPlan(t, in)
		if p.status.Revision != 2 {
			t.Fatalf("revision %d, want 2", p.status.Revision)
		}
		news := moved(p, toNewest)
		if len(news) > 1 {
			t.Fatalf("step %d: %v moved at once; maxUnavailable is 1", step, news)
		}
		order = append(order, news...)
		apply(in.clusters, p, in.now)
		in.last = p.status
		if p.status.Phase == vidrav1alpha1.RolloutCompleted {
			break
		}
		in.now = in.now.Add(time.Second)
		healthyNow(in.clusters, news...)
	}
	if want := []string{"c1", "p1", "p2", "p3", "x1"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if in.last.Phase != vidrav1alpha1.RolloutCompleted || in.last.Updated != 5 {
		t.Fatalf("status %+v, want Completed with 5 updated", in.last)
	}
}

// A cluster that is not healthy within healthTimeout stops the rollout at its wave: with
// Pause nothing more moves; with Rollback it returns to the stable revision alone.
func TestPlanStopsAtTheFailedWave(t *testing.T) {
	for _, policy := range []vidrav1alpha1.RolloutFailurePolicy{vidrav1alpha1.RolloutFailurePause, vidrav1alpha1.RolloutFailureRollback} {
		t.Run(string(policy), func(t *testing.T) {
			in := rolloutInput{spec: twoWaves(policy), hash: "h2", hasStable: true, now: t0, clusters: fleetOf()}
			in.last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
			p := mustPlan(t, in)
			apply(in.clusters, p, in.now)
			in.last = p.status
			in.clusters[0].unhealthy = "c1-web: Progressing: waiting for Deployment"

			in.now = t0.Add(30 * time.Second) // still within healthTimeout
			p = mustPlan(t, in)
			if len(p.moves) != 0 || p.status.Phase != vidrav1alpha1.RolloutProgressing || p.requeue != 30*time.Second {
				t.Fatalf("within the timeout: moves %v, phase %s, requeue %s", p.moves, p.status.Phase, p.requeue)
			}
			in.now = t0.Add(61 * time.Second)
			p = mustPlan(t, in)
			if !slices.Equal(p.status.FailedClusters, []string{"c1"}) {
				t.Fatalf("failed clusters %v", p.status.FailedClusters)
			}
			switch policy {
			case vidrav1alpha1.RolloutFailurePause:
				if p.status.Phase != vidrav1alpha1.RolloutFailed || len(p.moves) != 0 {
					t.Fatalf("phase %s, moves %v; want Failed and nothing moved", p.status.Phase, p.moves)
				}
			case vidrav1alpha1.RolloutFailureRollback:
				if p.status.Phase != vidrav1alpha1.RolloutRolledBack || !slices.Equal(moved(p, toStable), []string{"c1"}) || len(moved(p, toNewest)) != 0 {
					t.Fatalf("phase %s, moves %v; want RolledBack and c1 alone to the stable revision", p.status.Phase, p.moves)
				}
			}
			// It holds, at every later look, until a person resumes.
			apply(in.clusters, p, in.now)
			in.last = p.status
			in.now = in.now.Add(time.Hour)
			if p := mustPlan(t, in); len(moved(p, toNewest)) != 0 {
				t.Fatalf("moved %v after the failure", p.moves)
			}
			in.resume = "now"
			p = mustPlan(t, in)
			if p.status.Phase != vidrav1alpha1.RolloutProgressing || len(p.status.FailedClusters) != 0 {
				t.Fatalf("after resume: %+v", p.status)
			}
			if policy == vidrav1alpha1.RolloutFailureRollback && !slices.Equal(moved(p, toNewest), []string{"c1"}) {
				t.Fatalf("after resume the rolled back canary is updated again; moves %v", p.moves)
			}
		})
	}
}

// A cluster placed in the implicit wave before its labels were known, that has the
// revision and is not healthy yet once its labels put it in the canary wave, holds the
// completion within healthTimeout, and fails the rollout after it.
func TestPlanCompletesOnlyWhereHealthy(t *testing.T) {
	in := rolloutInput{spec: twoWaves(vidrav1alpha1.RolloutFailurePause), hash: "h1", now: t0, clusters: []clusterView{
		{name: "c1", labels: map[string]string{"ring": "canary"}, present: true, atTarget: true, updatedAt: t0},
		{name: "p1", labels: map[string]string{"ring": "prod"}, present: true, atTarget: true, healthy: true, updatedAt: t0},
	}}
	in.last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutProgressing, Wave: "remaining"}
	in.now = t0.Add(10 * time.Second)
	p := mustPlan(t, in)
	// The last wave became healthy now: the canary has healthTimeout from here.
	if p.status.Phase != vidrav1alpha1.RolloutProgressing || !strings.Contains(p.status.Message, "waiting for c1 to become healthy") || p.requeue != time.Minute {
		t.Fatalf("with the canary unhealthy: phase %s, message %q, requeue %s", p.status.Phase, p.status.Message, p.requeue)
	}
	in.last = p.status
	healthyNow(in.clusters, "c1")
	if p := mustPlan(t, in); p.status.Phase != vidrav1alpha1.RolloutCompleted || p.status.Updated != 2 {
		t.Fatalf("with both healthy: phase %s, updated %d", p.status.Phase, p.status.Updated)
	}
	in.clusters[0].healthy = false
	in.now = t0.Add(71 * time.Second)
	p = mustPlan(t, in)
	if p.status.Phase != vidrav1alpha1.RolloutFailed || !slices.Equal(p.status.FailedClusters, []string{"c1"}) || len(p.moves) != 0 {
		t.Fatalf("past healthTimeout: phase %s, failed %v, moves %v", p.status.Phase, p.status.FailedClusters, p.moves)
	}

	// A cluster updated long ago that turns unhealthy as the last wave completes gets a
	// whole healthTimeout from then, and with Rollback nothing is sent back.
	in.spec.OnFailure = vidrav1alpha1.RolloutFailureRollback
	in.hasStable = true
	completed := metav1.NewTime(t0.Add(10 * time.Minute))
	in.last.WaveCompletedAt = &completed
	in.now = completed.Add(30 * time.Second)
	if p := mustPlan(t, in); p.status.Phase != vidrav1alpha1.RolloutProgressing || p.requeue != 30*time.Second {
		t.Fatalf("within the grace after the last wave: phase %s, requeue %s", p.status.Phase, p.requeue)
	}
	in.now = completed.Add(61 * time.Second)
	if p := mustPlan(t, in); p.status.Phase != vidrav1alpha1.RolloutFailed || len(p.moves) != 0 {
		t.Fatalf("past the grace: phase %s, moves %v; want Failed and nothing rolled back", p.status.Phase, p.moves)
	}
}

// With Rollback, the failed wave goes back whole: a cluster of it that took the revision and
// is healthy goes back too; earlier waves and clusters not reached are untouched.
func TestPlanRollbackReturnsTheWholeWave(t *testing.T) {
	spec := twoWaves(vidrav1alpha1.RolloutFailureRollback)
	two := intstr.FromInt32(2)
	spec.MaxUnavailable = &two
	in := rolloutInput{spec: spec, hash: "h2", hasStable: true, now: t0, clusters: fleetOf()}
	in.last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
	p := mustPlan(t, in) // the canary
	apply(in.clusters, p, in.now)
	healthyNow(in.clusters, "c1")
	in.last = p.status
	p = mustPlan(t, in) // prod, two at once
	if !slices.Equal(moved(p, toNewest), []string{"p1", "p2"}) {
		t.Fatalf("prod moves %v", p.moves)
	}
	apply(in.clusters, p, in.now)
	healthyNow(in.clusters, "p1")
	in.clusters[2].unhealthy = "p2-web: Progressing: waiting for Deployment"
	in.last = p.status
	in.now = t0.Add(61 * time.Second)
	p = mustPlan(t, in)
	if p.status.Phase != vidrav1alpha1.RolloutRolledBack || !slices.Equal(p.status.FailedClusters, []string{"p2"}) {
		t.Fatalf("phase %s, failed %v", p.status.Phase, p.status.FailedClusters)
	}
	if !slices.Equal(moved(p, toStable), []string{"p1", "p2"}) || len(moved(p, toNewest)) != 0 {
		t.Fatalf("moves %v; want p1 and p2 back to the stable revision, c1 and p3 untouched", p.moves)
	}
	if !strings.Contains(p.status.Message, "wave prod rolled back to the previous revision: p1, p2") {
		t.Errorf("message %q", p.status.Message)
	}
}

// A newer revision mid-rollout starts again from the first wave; clusters joining get the
// stable revision until their wave is reached.
func TestPlanNewerRevisionStartsOverAndJoinersGetStable(t *testing.T) {
	in := rolloutInput{spec: twoWaves(vidrav1alpha1.RolloutFailurePause), hash: "h2", hasStable: true, now: t0, clusters: fleetOf()}
	in.last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
	p := mustPlan(t, in)
	apply(in.clusters, p, in.now)
	healthyNow(in.clusters, "c1")
	in.last = p.status
	p = mustPlan(t, in)
	if p.status.Wave != "prod" || !slices.Equal(moved(p, toNewest), []string{"p1"}) {
		t.Fatalf("wave %s, moves %v", p.status.Wave, p.moves)
	}
	apply(in.clusters, p, in.now)
	in.last = p.status

	// h3 arrives; a cluster joins the prod ring.
	in.hash = "h3"
	for i := range in.clusters {
		in.clusters[i].atTarget, in.clusters[i].healthy = false, false
	}
	in.clusters = append(in.clusters, clusterView{name: "p4", labels: map[string]string{"ring": "prod"}})
	p = mustPlan(t, in)
	if p.status.Revision != 3 || p.status.Wave != "canary" || !slices.Equal(moved(p, toNewest), []string{"c1"}) {
		t.Fatalf("revision %d, wave %s, moves %v; want 3 from the canary", p.status.Revision, p.status.Wave, p.moves)
	}
	if !slices.Equal(moved(p, toStable), []string{"p4"}) {
		t.Fatalf("the joining cluster got %v, want the stable revision", p.moves)
	}
}

// A cluster that joins a wave the rollout has passed (its VidraCluster came a moment
// late) gets the revision before it completes: the first revision of a sync whose canary
// was not yet known when it started must not complete on prod alone.
func TestPlanClusterJoiningAPassedWaveTakesItBack(t *testing.T) {
	prod := clusterView{name: "p1", labels: map[string]string{"ring": "prod"}}
	in := rolloutInput{spec: twoWaves(vidrav1alpha1.RolloutFailurePause), hash: "h1", now: t0, clusters: []clusterView{prod}}
	p := mustPlan(t, in)
	if p.status.Wave != "prod" || !slices.Equal(moved(p, toNewest), []string{"p1"}) {
		t.Fatalf("wave %s, moves %v; want p1 in the only wave with clusters", p.status.Wave, p.moves)
	}
	apply(in.clusters, p, in.now)
	in.last = p.status

	// The canary's VidraCluster appears while p1 becomes healthy.
	in.clusters = append(in.clusters, clusterView{name: "c1", labels: map[string]string{"ring": "canary"}})
	healthyNow(in.clusters, "p1")
	p = mustPlan(t, in)
	if p.completed || p.status.Phase != vidrav1alpha1.RolloutProgressing || p.status.Wave != "canary" {
		t.Fatalf("phase %s at wave %s (completed %v); want the canary wave back", p.status.Phase, p.status.Wave, p.completed)
	}
	if !slices.Equal(moved(p, toNewest), []string{"c1"}) {
		t.Fatalf("moves %v; want c1 updated", p.moves)
	}
	apply(in.clusters, p, in.now)
	healthyNow(in.clusters, "c1")
	in.last = p.status
	p = mustPlan(t, in)
	if !p.completed || p.status.Updated != 2 {
		t.Fatalf("phase %s, %d updated; want completed on both", p.status.Phase, p.status.Updated)
	}
}

// pauseAfter holds the next wave; a paused rollout moves nothing.
func TestPlanPauseAfterAndPaused(t *testing.T) {
	spec := twoWaves(vidrav1alpha1.RolloutFailurePause)
	spec.Waves[0].PauseAfter = &metav1.Duration{Duration: 5 * time.Minute}
	in := rolloutInput{spec: spec, hash: "h2", hasStable: true, now: t0, clusters: fleetOf()}
	in.last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
	p := mustPlan(t, in)
	apply(in.clusters, p, in.now)
	healthyNow(in.clusters, "c1")
	in.last = p.status
	p = mustPlan(t, in)
	if len(p.moves) != 0 || p.requeue != 5*time.Minute || p.status.WaveCompletedAt == nil {
		t.Fatalf("moves %v, requeue %s: the prod wave must wait 5m", p.moves, p.requeue)
	}
	in.last = p.status
	in.now = t0.Add(5 * time.Minute)
	in.spec.Paused = true
	if p = mustPlan(t, in); len(p.moves) != 0 || p.status.Phase != vidrav1alpha1.RolloutPaused {
		t.Fatalf("paused: moves %v, phase %s", p.moves, p.status.Phase)
	}
	in.last = p.status
	in.spec.Paused = false
	if p = mustPlan(t, in); !slices.Equal(moved(p, toNewest), []string{"p1"}) {
		t.Fatalf("after the pause: moves %v", p.moves)
	}
}

// maxUnavailable as a percentage of the wave, rounded down, never below one.
func TestBudget(t *testing.T) {
	for _, c := range []struct {
		mu   intstr.IntOrString
		n    int
		want int
	}{
		{intstr.FromInt32(2), 5, 2}, {intstr.FromString("25%"), 8, 2}, {intstr.FromString("25%"), 3, 1}, {intstr.FromString("100%"), 4, 4},
	} {
		spec := vidrav1alpha1.RolloutSpec{MaxUnavailable: &c.mu}
		if got := budget(spec, c.n); got != c.want {
			t.Errorf("budget(%s, %d) = %d, want %d", c.mu.String(), c.n, got, c.want)
		}
	}
}

// A cluster pinned by a rollback holds its wave: the revision does not complete where it
// does not run, and once unpinned the cluster is updated within the wave.
func TestPlanPinnedClustersHoldTheirWave(t *testing.T) {
	in := rolloutInput{spec: twoWaves(vidrav1alpha1.RolloutFailurePause), hash: "h2", hasStable: true, now: t0, clusters: fleetOf()[:2]}
	in.last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
	for i := range in.clusters {
		in.clusters[i].pinned = true
	}
	p := mustPlan(t, in)
	if p.status.Phase != vidrav1alpha1.RolloutProgressing || p.completed || len(p.moves) != 0 {
		t.Fatalf("all pinned: phase %s, completed %v, moves %v; want Progressing and nothing moved", p.status.Phase, p.completed, p.moves)
	}
	in.last = p.status
	in.clusters[0].pinned, in.clusters[1].pinned = false, false // resumed
	if p = mustPlan(t, in); !slices.Equal(moved(p, toNewest), []string{"c1"}) {
		t.Fatalf("after resume: moves %v, want the canary alone", p.moves)
	}
}

// A cluster of the wave already unhealthy on its old revision counts against
// maxUnavailable.
func TestPlanUnhealthyClustersCountAgainstTheBudget(t *testing.T) {
	in := rolloutInput{spec: twoWaves(vidrav1alpha1.RolloutFailurePause), hash: "h2", hasStable: true, now: t0, clusters: fleetOf()}
	in.last = vidrav1alpha1.RolloutStatus{Revision: 2, ContentHash: "h2", Phase: vidrav1alpha1.RolloutProgressing, Wave: "prod"}
	in.clusters[0].atTarget, in.clusters[0].healthy = true, true
	in.clusters[2].unavailable = true // p2, still on the old revision
	if p := mustPlan(t, in); len(p.moves) != 0 {
		t.Fatalf("moves %v while p2 is unavailable; maxUnavailable is 1", p.moves)
	}
	in.clusters[2].unavailable = false
	if p := mustPlan(t, in); !slices.Equal(moved(p, toNewest), []string{"p1"}) {
		t.Fatalf("moves %v, want p1", moved(p, toNewest))
	}
}
