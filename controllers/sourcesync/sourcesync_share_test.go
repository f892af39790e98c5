package sourcesync_test

import (
	"fmt"
	"testing"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A Git host that answers nothing holds no more than its share of the GitSync workers:
// four GitSyncs read it, and hold two of the four workers
// (--max-concurrent-syncs-per-source); a GitSync of another host is delivered meanwhile.
// Before, the four held every worker until the source timeout (2 minutes), and every
// other team's GitSyncs waited.
func TestAGitHostThatAnswersNothingHoldsOnlyItsShareOfTheWorkers(t *testing.T) {
	const ns = "gs-share"
	createNamespace(t, ns)
	member := fleet.Members[0]
	slow := gitserver.New(t)
	var held []*vidrav1alpha1.GitSync
	for i := range 4 {
		name := fmt.Sprintf("silent-%d", i)
		repo := slow.Repo(t, name)
		repo.Commit(t, "main", map[string]string{"app/cm.yaml": configMap(name, "v")}, "first")
		held = append(held, gitSync(name, repo.URL(), func(gs *vidrav1alpha1.GitSync) {
			gs.Spec.Source.Path = "app"
			gs.Spec.Destination = toCluster(member.Name, ns)
		}))
	}
	release := slow.Hold(t)
	for _, gs := range held {
		create(t, gs)
	}
	testfleet.Eventually(t, 30*time.Second, "the silent host holding two requests", func() (bool, error) {
		now, _ := slow.Holding()
		return now >= 2, nil
	})

	quick := gitserver.New(t)
	repo := quick.Repo(t, "answers")
	repo.Commit(t, "main", map[string]string{"app/cm.yaml": configMap("answers", "v")}, "first")
	gs := gitSync("answers", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "app"
		gs.Spec.Destination = toCluster(member.Name, ns)
	})
	create(t, gs)
	ready(t, gs)
	waitValue(t, member, ns, "answers", "v")
	if _, most := slow.Holding(); most != 2 {
		t.Errorf("the silent host held %d requests at once, want 2 (its share of 4 workers)", most)
	}

	release()
	for _, gs := range held {
		ready(t, gs)
	}
}
