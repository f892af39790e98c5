package sourcesync_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/alertreceiver"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// setRing labels a member's enrollment (and so its VidraCluster) ring=value; "" removes it.
func setRing(t *testing.T, member, value string) {
	t.Helper()
	setClusterLabel(t, member, "ring", value)
}

// setClusterLabel sets (or, with "", removes) a label of a member's VidraCluster.
func setClusterLabel(t *testing.T, member, key, value string) {
	t.Helper()
	testoperator.LabelCluster(t, fleet.Hub.Client, member, key, value)
}

// waitRollout waits until the sync's rollout of revision is in phase.
func waitRollout(t *testing.T, s sync, revision int64, phase vidrav1alpha1.RolloutPhase) {
	t.Helper()
	testfleet.Eventually(t, 90*time.Second, fmt.Sprintf("rollout of revision %d of %s %s", revision, s.GetName(), phase), func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
			return false, err
		}
		r := s.SourceStatus().Rollout
		return r != nil && r.Revision == revision && r.Phase == phase, nil
	})
}

// ringsInWaves selects the members with a ring label, and rolls out to the canary ring
// first, then prod, one cluster at a time, rolling a wave back when it is not healthy
// within 10s.
func ringsInWaves(ns string) (vidrav1alpha1.SyncDestination, *vidrav1alpha1.RolloutSpec) {
	one := intstr.FromInt32(1)
	return vidrav1alpha1.SyncDestination{
			Destination:     vidrav1alpha1.Destination{Namespace: ns},
			ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ring", Operator: metav1.LabelSelectorOpExists}}},
		}, &vidrav1alpha1.RolloutSpec{
			Strategy: vidrav1alpha1.RolloutProgressive,
			Waves: []vidrav1alpha1.RolloutWave{
				{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}},
				{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "prod"}}},
			},
			MaxUnavailable: &one,
			HealthTimeout:  &metav1.Duration{Duration: 10 * time.Second},
			OnFailure:      vidrav1alpha1.RolloutFailureRollback,
		}
}

// unavailable is a Deployment that never becomes Available: nothing runs pods here.
const unavailable = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.invalid/web:1}]
`

// A progressive rollout of a new commit that cannot become healthy stops at the first
// wave, which rolls back; the second wave never sees the commit.
func TestProgressiveRolloutOfANewCommitStopsAtTheFirstWave(t *testing.T) {
	const ns = "gs-waves"
	createNamespace(t, ns)
	canary, prod := fleet.Members[0], fleet.Members[1]
	setRing(t, canary.Name, "canary")
	t.Cleanup(func() { setRing(t, canary.Name, "") })
	setRing(t, prod.Name, "prod")
	t.Cleanup(func() { setRing(t, prod.Name, "") })

	rcv := alertTo(t, "waves")
	srv := gitserver.New(t)
	repo := srv.Repo(t, "waves")
	repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v1")}, "v1")
	gs := gitSync("waves", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Destination, gs.Spec.Rollout = ringsInWaves(ns)
	})
	create(t, gs)
	waitRollout(t, gs, 1, vidrav1alpha1.RolloutCompleted)
	waitValue(t, canary, ns, "web", "v1")
	waitValue(t, prod, ns, "web", "v1")

	// A healthy commit moves through both waves.
	repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v2")}, "v2")
	requestSync(t, gs)
	waitRollout(t, gs, 2, vidrav1alpha1.RolloutCompleted)
	waitValue(t, prod, ns, "web", "v2")

	// A commit that never becomes healthy stops at the canary, which returns to v2.
	bad := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v3"), "deploy.yaml": unavailable}, "v3: unavailable")
	requestSync(t, gs)
	waitValue(t, canary, ns, "web", "v3")
	waitRollout(t, gs, 3, vidrav1alpha1.RolloutRolledBack)
	if !slices.Equal(gs.Status.Rollout.FailedClusters, []string{canary.Name}) {
		t.Errorf("failed clusters %v, want the canary", gs.Status.Rollout.FailedClusters)
	}
	if gs.Status.Source.Revision != "main@sha1:"+bad {
		t.Errorf("status.source.revision = %s, want the commit fetched (%s)", gs.Status.Source.Revision, bad)
	}
	waitValue(t, canary, ns, "web", "v2")
	if v := valueOf(t, prod, ns, "web"); v != "v2" {
		t.Errorf("the prod wave has %q, want v2: it must never see the failed commit", v)
	}
	waitEvent(t, gs, vidrav1alpha1.ReasonRolledBack, "revision 3")

	// Its alerts told each wave advancing, the rollout completing, and the rollback.
	for _, reason := range []string{vidrav1alpha1.EventWaveStarted, vidrav1alpha1.EventWaveCompleted,
		vidrav1alpha1.EventRolloutCompleted, vidrav1alpha1.ReasonRolledBack} {
		rcv.WaitFor(t, reason, alertreceiver.Reason(reason, "waves"))
	}
}
