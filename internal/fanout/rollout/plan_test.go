package rollout

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
func fleetOf() []Cluster {
	ring := func(r string) map[string]string { return map[string]string{"ring": r} }
	return []Cluster{
		{Name: "c1", Labels: ring("canary"), Present: true},
		{Name: "p1", Labels: ring("prod"), Present: true},
		{Name: "p2", Labels: ring("prod"), Present: true},
		{Name: "p3", Labels: ring("prod"), Present: true},
		{Name: "x1", Present: true},
	}
}

func moved(p Plan, m Move) []string {
	var out []string
	for name, mv := range p.Moves {
		if mv == m {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// apply plays the plan's moves on the views, as the API would show them afterwards.
func apply(clusters []Cluster, p Plan, at time.Time) {
	for i := range clusters {
		switch p.Moves[clusters[i].Name] {
		case ToNewest:
			clusters[i].Present, clusters[i].AtTarget, clusters[i].Healthy, clusters[i].UpdatedAt = true, true, false, at
		case ToStable:
			clusters[i].Present, clusters[i].AtTarget, clusters[i].Healthy = true, false, false
		}
	}
}

func healthyNow(clusters []Cluster, names ...string) {
	for i := range clusters {
		if slices.Contains(names, clusters[i].Name) {
			clusters[i].Healthy = true
		}
	}
}

func mustPlan(t *testing.T, in Input) Plan {
	t.Helper()
	p, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A revision moves wave by wave, never more than maxUnavailable clusters of a wave
// updating at once, and the implicit wave comes last.
func TestPlanMovesWaveByWaveWithinTheBudget(t *testing.T) {
	clusters := fleetOf()
	in := Input{Spec: twoWaves(vidrav1alpha1.RolloutFailurePause), Hash: "h2", HasStable: true, Now: t0, Clusters: clusters}
	in.Last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}

	var order []string
	for step := 0; step < 20; step++ {
		p := mustPlan(t, in)
		if p.Status.Revision != 2 {
			t.Fatalf("revision %d, want 2", p.Status.Revision)
		}
		news := moved(p, ToNewest)
		if len(news) > 1 {
			t.Fatalf("step %d: %v moved at once; maxUnavailable is 1", step, news)
		}
		order = append(order, news...)
		apply(in.Clusters, p, in.Now)
		in.Last = p.Status
		if p.Status.Phase == vidrav1alpha1.RolloutCompleted {
			break
		}
		in.Now = in.Now.Add(time.Second)
		healthyNow(in.Clusters, news...)
	}
	if want := []string{"c1", "p1", "p2", "p3", "x1"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if in.Last.Phase != vidrav1alpha1.RolloutCompleted || in.Last.Updated != 5 {
		t.Fatalf("status %+v, want Completed with 5 updated", in.Last)
	}
}

// A cluster that is not healthy within healthTimeout stops the rollout at its wave: with
// Pause nothing more moves; with Rollback it returns to the stable revision alone.
func TestPlanStopsAtTheFailedWave(t *testing.T) {
	for _, policy := range []vidrav1alpha1.RolloutFailurePolicy{vidrav1alpha1.RolloutFailurePause, vidrav1alpha1.RolloutFailureRollback} {
		t.Run(string(policy), func(t *testing.T) {
			in := Input{Spec: twoWaves(policy), Hash: "h2", HasStable: true, Now: t0, Clusters: fleetOf()}
			in.Last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
			p := mustPlan(t, in)
			apply(in.Clusters, p, in.Now)
			in.Last = p.Status
			in.Clusters[0].Unhealthy = "c1-web: Progressing: waiting for Deployment"

			in.Now = t0.Add(30 * time.Second) // still within healthTimeout
			p = mustPlan(t, in)
			if len(p.Moves) != 0 || p.Status.Phase != vidrav1alpha1.RolloutProgressing || p.Requeue != 30*time.Second {
				t.Fatalf("within the timeout: moves %v, phase %s, requeue %s", p.Moves, p.Status.Phase, p.Requeue)
			}
			in.Now = t0.Add(61 * time.Second)
			p = mustPlan(t, in)
			if !slices.Equal(p.Status.FailedClusters, []string{"c1"}) {
				t.Fatalf("failed clusters %v", p.Status.FailedClusters)
			}
			switch policy {
			case vidrav1alpha1.RolloutFailurePause:
				if p.Status.Phase != vidrav1alpha1.RolloutFailed || len(p.Moves) != 0 {
					t.Fatalf("phase %s, moves %v; want Failed and nothing moved", p.Status.Phase, p.Moves)
				}
			case vidrav1alpha1.RolloutFailureRollback:
				if p.Status.Phase != vidrav1alpha1.RolloutRolledBack || !slices.Equal(moved(p, ToStable), []string{"c1"}) || len(moved(p, ToNewest)) != 0 {
					t.Fatalf("phase %s, moves %v; want RolledBack and c1 alone to the stable revision", p.Status.Phase, p.Moves)
				}
			}
			// It holds, at every later look, until a person resumes.
			apply(in.Clusters, p, in.Now)
			in.Last = p.Status
			in.Now = in.Now.Add(time.Hour)
			if p := mustPlan(t, in); len(moved(p, ToNewest)) != 0 {
				t.Fatalf("moved %v after the failure", p.Moves)
			}
			in.Resume = "now"
			p = mustPlan(t, in)
			if p.Status.Phase != vidrav1alpha1.RolloutProgressing || len(p.Status.FailedClusters) != 0 {
				t.Fatalf("after resume: %+v", p.Status)
			}
			if policy == vidrav1alpha1.RolloutFailureRollback && !slices.Equal(moved(p, ToNewest), []string{"c1"}) {
				t.Fatalf("after resume the rolled back canary is updated again; moves %v", p.Moves)
			}
		})
	}
}

// A cluster placed in the implicit wave before its labels were known, that has the
// revision and is not healthy yet once its labels put it in the canary wave, holds the
// completion within healthTimeout, and fails the rollout after it.
func TestPlanCompletesOnlyWhereHealthy(t *testing.T) {
	in := Input{Spec: twoWaves(vidrav1alpha1.RolloutFailurePause), Hash: "h1", Now: t0, Clusters: []Cluster{
		{Name: "c1", Labels: map[string]string{"ring": "canary"}, Present: true, AtTarget: true, UpdatedAt: t0},
		{Name: "p1", Labels: map[string]string{"ring": "prod"}, Present: true, AtTarget: true, Healthy: true, UpdatedAt: t0},
	}}
	in.Last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutProgressing, Wave: "remaining"}
	in.Now = t0.Add(10 * time.Second)
	p := mustPlan(t, in)
	// The last wave became healthy now: the canary has healthTimeout from here.
	if p.Status.Phase != vidrav1alpha1.RolloutProgressing || !strings.Contains(p.Status.Message, "waiting for c1 to become healthy") || p.Requeue != time.Minute {
		t.Fatalf("with the canary unhealthy: phase %s, message %q, requeue %s", p.Status.Phase, p.Status.Message, p.Requeue)
	}
	in.Last = p.Status
	healthyNow(in.Clusters, "c1")
	if p := mustPlan(t, in); p.Status.Phase != vidrav1alpha1.RolloutCompleted || p.Status.Updated != 2 {
		t.Fatalf("with both healthy: phase %s, updated %d", p.Status.Phase, p.Status.Updated)
	}
	in.Clusters[0].Healthy = false
	in.Now = t0.Add(71 * time.Second)
	p = mustPlan(t, in)
	if p.Status.Phase != vidrav1alpha1.RolloutFailed || !slices.Equal(p.Status.FailedClusters, []string{"c1"}) || len(p.Moves) != 0 {
		t.Fatalf("past healthTimeout: phase %s, failed %v, moves %v", p.Status.Phase, p.Status.FailedClusters, p.Moves)
	}

	// A cluster updated long ago that turns unhealthy as the last wave completes gets a
	// whole healthTimeout from then, and with Rollback nothing is sent back.
	in.Spec.OnFailure = vidrav1alpha1.RolloutFailureRollback
	in.HasStable = true
	completed := metav1.NewTime(t0.Add(10 * time.Minute))
	in.Last.WaveCompletedAt = &completed
	in.Now = completed.Add(30 * time.Second)
	if p := mustPlan(t, in); p.Status.Phase != vidrav1alpha1.RolloutProgressing || p.Requeue != 30*time.Second {
		t.Fatalf("within the grace after the last wave: phase %s, requeue %s", p.Status.Phase, p.Requeue)
	}
	in.Now = completed.Add(61 * time.Second)
	if p := mustPlan(t, in); p.Status.Phase != vidrav1alpha1.RolloutFailed || len(p.Moves) != 0 {
		t.Fatalf("past the grace: phase %s, moves %v; want Failed and nothing rolled back", p.Status.Phase, p.Moves)
	}
}

// With Rollback, the failed wave goes back whole: a cluster of it that took the revision and
// is healthy goes back too; earlier waves and clusters not reached are untouched.
func TestPlanRollbackReturnsTheWholeWave(t *testing.T) {
	spec := twoWaves(vidrav1alpha1.RolloutFailureRollback)
	two := intstr.FromInt32(2)
	spec.MaxUnavailable = &two
	in := Input{Spec: spec, Hash: "h2", HasStable: true, Now: t0, Clusters: fleetOf()}
	in.Last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
	p := mustPlan(t, in) // the canary
	apply(in.Clusters, p, in.Now)
	healthyNow(in.Clusters, "c1")
	in.Last = p.Status
	p = mustPlan(t, in) // prod, two at once
	if !slices.Equal(moved(p, ToNewest), []string{"p1", "p2"}) {
		t.Fatalf("prod moves %v", p.Moves)
	}
	apply(in.Clusters, p, in.Now)
	healthyNow(in.Clusters, "p1")
	in.Clusters[2].Unhealthy = "p2-web: Progressing: waiting for Deployment"
	in.Last = p.Status
	in.Now = t0.Add(61 * time.Second)
	p = mustPlan(t, in)
	if p.Status.Phase != vidrav1alpha1.RolloutRolledBack || !slices.Equal(p.Status.FailedClusters, []string{"p2"}) {
		t.Fatalf("phase %s, failed %v", p.Status.Phase, p.Status.FailedClusters)
	}
	if !slices.Equal(moved(p, ToStable), []string{"p1", "p2"}) || len(moved(p, ToNewest)) != 0 {
		t.Fatalf("moves %v; want p1 and p2 back to the stable revision, c1 and p3 untouched", p.Moves)
	}
	if !strings.Contains(p.Status.Message, "wave prod rolled back to the previous revision: p1, p2") {
		t.Errorf("message %q", p.Status.Message)
	}
}

// A newer revision mid-rollout starts again from the first wave; clusters joining get the
// stable revision until their wave is reached.
func TestPlanNewerRevisionStartsOverAndJoinersGetStable(t *testing.T) {
	in := Input{Spec: twoWaves(vidrav1alpha1.RolloutFailurePause), Hash: "h2", HasStable: true, Now: t0, Clusters: fleetOf()}
	in.Last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
	p := mustPlan(t, in)
	apply(in.Clusters, p, in.Now)
	healthyNow(in.Clusters, "c1")
	in.Last = p.Status
	p = mustPlan(t, in)
	if p.Status.Wave != "prod" || !slices.Equal(moved(p, ToNewest), []string{"p1"}) {
		t.Fatalf("wave %s, moves %v", p.Status.Wave, p.Moves)
	}
	apply(in.Clusters, p, in.Now)
	in.Last = p.Status

	// h3 arrives; a cluster joins the prod ring.
	in.Hash = "h3"
	for i := range in.Clusters {
		in.Clusters[i].AtTarget, in.Clusters[i].Healthy = false, false
	}
	in.Clusters = append(in.Clusters, Cluster{Name: "p4", Labels: map[string]string{"ring": "prod"}})
	p = mustPlan(t, in)
	if p.Status.Revision != 3 || p.Status.Wave != "canary" || !slices.Equal(moved(p, ToNewest), []string{"c1"}) {
		t.Fatalf("revision %d, wave %s, moves %v; want 3 from the canary", p.Status.Revision, p.Status.Wave, p.Moves)
	}
	if !slices.Equal(moved(p, ToStable), []string{"p4"}) {
		t.Fatalf("the joining cluster got %v, want the stable revision", p.Moves)
	}
}

// A cluster that joins a wave the rollout has passed (its VidraCluster came a moment
// late) gets the revision before it completes: the first revision of a sync whose canary
// was not yet known when it started must not complete on prod alone.
func TestPlanClusterJoiningAPassedWaveTakesItBack(t *testing.T) {
	prod := Cluster{Name: "p1", Labels: map[string]string{"ring": "prod"}}
	in := Input{Spec: twoWaves(vidrav1alpha1.RolloutFailurePause), Hash: "h1", Now: t0, Clusters: []Cluster{prod}}
	p := mustPlan(t, in)
	if p.Status.Wave != "prod" || !slices.Equal(moved(p, ToNewest), []string{"p1"}) {
		t.Fatalf("wave %s, moves %v; want p1 in the only wave with clusters", p.Status.Wave, p.Moves)
	}
	apply(in.Clusters, p, in.Now)
	in.Last = p.Status

	// The canary's VidraCluster appears while p1 becomes healthy.
	in.Clusters = append(in.Clusters, Cluster{Name: "c1", Labels: map[string]string{"ring": "canary"}})
	healthyNow(in.Clusters, "p1")
	p = mustPlan(t, in)
	if p.Completed || p.Status.Phase != vidrav1alpha1.RolloutProgressing || p.Status.Wave != "canary" {
		t.Fatalf("phase %s at wave %s (completed %v); want the canary wave back", p.Status.Phase, p.Status.Wave, p.Completed)
	}
	if !slices.Equal(moved(p, ToNewest), []string{"c1"}) {
		t.Fatalf("moves %v; want c1 updated", p.Moves)
	}
	apply(in.Clusters, p, in.Now)
	healthyNow(in.Clusters, "c1")
	in.Last = p.Status
	p = mustPlan(t, in)
	if !p.Completed || p.Status.Updated != 2 {
		t.Fatalf("phase %s, %d updated; want completed on both", p.Status.Phase, p.Status.Updated)
	}
}

// pauseAfter holds the next wave; a paused rollout moves nothing.
func TestPlanPauseAfterAndPaused(t *testing.T) {
	spec := twoWaves(vidrav1alpha1.RolloutFailurePause)
	spec.Waves[0].PauseAfter = &metav1.Duration{Duration: 5 * time.Minute}
	in := Input{Spec: spec, Hash: "h2", HasStable: true, Now: t0, Clusters: fleetOf()}
	in.Last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
	p := mustPlan(t, in)
	apply(in.Clusters, p, in.Now)
	healthyNow(in.Clusters, "c1")
	in.Last = p.Status
	p = mustPlan(t, in)
	if len(p.Moves) != 0 || p.Requeue != 5*time.Minute || p.Status.WaveCompletedAt == nil {
		t.Fatalf("moves %v, requeue %s: the prod wave must wait 5m", p.Moves, p.Requeue)
	}
	in.Last = p.Status
	in.Now = t0.Add(5 * time.Minute)
	in.Spec.Paused = true
	if p = mustPlan(t, in); len(p.Moves) != 0 || p.Status.Phase != vidrav1alpha1.RolloutPaused {
		t.Fatalf("paused: moves %v, phase %s", p.Moves, p.Status.Phase)
	}
	in.Last = p.Status
	in.Spec.Paused = false
	if p = mustPlan(t, in); !slices.Equal(moved(p, ToNewest), []string{"p1"}) {
		t.Fatalf("after the pause: moves %v", p.Moves)
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
	in := Input{Spec: twoWaves(vidrav1alpha1.RolloutFailurePause), Hash: "h2", HasStable: true, Now: t0, Clusters: fleetOf()[:2]}
	in.Last = vidrav1alpha1.RolloutStatus{Revision: 1, ContentHash: "h1", Phase: vidrav1alpha1.RolloutCompleted}
	for i := range in.Clusters {
		in.Clusters[i].Pinned = true
	}
	p := mustPlan(t, in)
	if p.Status.Phase != vidrav1alpha1.RolloutProgressing || p.Completed || len(p.Moves) != 0 {
		t.Fatalf("all pinned: phase %s, completed %v, moves %v; want Progressing and nothing moved", p.Status.Phase, p.Completed, p.Moves)
	}
	in.Last = p.Status
	in.Clusters[0].Pinned, in.Clusters[1].Pinned = false, false // resumed
	if p = mustPlan(t, in); !slices.Equal(moved(p, ToNewest), []string{"c1"}) {
		t.Fatalf("after resume: moves %v, want the canary alone", p.Moves)
	}
}

// A cluster of the wave already unhealthy on its old revision counts against
// maxUnavailable.
func TestPlanUnhealthyClustersCountAgainstTheBudget(t *testing.T) {
	in := Input{Spec: twoWaves(vidrav1alpha1.RolloutFailurePause), Hash: "h2", HasStable: true, Now: t0, Clusters: fleetOf()}
	in.Last = vidrav1alpha1.RolloutStatus{Revision: 2, ContentHash: "h2", Phase: vidrav1alpha1.RolloutProgressing, Wave: "prod"}
	in.Clusters[0].AtTarget, in.Clusters[0].Healthy = true, true
	in.Clusters[2].Unavailable = true // p2, still on the old revision, not yet reconciled
	if p := mustPlan(t, in); len(p.Moves) != 0 {
		t.Fatalf("moves %v while p2 is unavailable; maxUnavailable is 1", p.Moves)
	}
	// p2 failing as its reconcile saw it: it is down already, and moves without taking
	// the budget, which it fills, so no other cluster moves (a canary broken on an older
	// revision gets the newer one).
	in.Clusters[2].Failing = true
	if p := mustPlan(t, in); !slices.Equal(moved(p, ToNewest), []string{"p2"}) || len(p.Moves) != 1 {
		t.Fatalf("moves %v while p2 is failing, want p2 alone; maxUnavailable is 1", p.Moves)
	}
	// However many are failing, no more than the budget move at once.
	for i := 1; i <= 3; i++ {
		in.Clusters[i].Unavailable, in.Clusters[i].Failing = true, true
	}
	if p := mustPlan(t, in); len(moved(p, ToNewest)) != 1 {
		t.Fatalf("moves %v with p1..p3 failing, want one: maxUnavailable is 1", p.Moves)
	}
	in.Clusters[1].Unavailable, in.Clusters[1].Failing, in.Clusters[3].Unavailable, in.Clusters[3].Failing = false, false, false, false
	in.Clusters[2].Failing = false
	in.Clusters[2].Unavailable = false
	if p := mustPlan(t, in); !slices.Equal(moved(p, ToNewest), []string{"p1"}) {
		t.Fatalf("moves %v, want p1", moved(p, ToNewest))
	}
}
