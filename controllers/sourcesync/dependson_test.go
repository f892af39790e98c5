package sourcesync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A sync that depends on another waits cluster by cluster: its bundle applies on a
// cluster once the dependency is Ready there, and the cluster where the dependency is
// not yet Ready does not hold the other back. Each waiting VidraResource, and the sync,
// say what they wait for and where.
func TestADependentWaitsOnEachClusterForItsDependency(t *testing.T) {
	const ns = "gs-depends"
	createNamespace(t, ns)
	first, second := fleet.Members[0], fleet.Members[1]
	srv := gitserver.New(t)
	repo := srv.Repo(t, "depends")
	repo.Commit(t, "main", map[string]string{"db/db.yaml": deployment("db"), "app/app.yaml": configMap("app", "v1")}, "db and app")
	db := gitSync("depends-db", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "db"
		gs.Spec.Destination = everyMember(ns)
	})
	app := gitSync("depends-app", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "app"
		gs.Spec.Destination = everyMember(ns)
		gs.Spec.DependsOn = []vidrav1alpha1.SyncReference{{Name: db.Name}} // of its own kind, as Flux's
	})
	create(t, db)
	create(t, app)
	waitReadiness(t, app, metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing,
		"Ready on 0 of 2 clusters; waiting for "+first.Name+", "+second.Name+": waiting for GitSync depends-db on "+first.Name+": ")
	for _, m := range fleet.Members {
		waitWaiting(t, app, m.Name, "waiting for GitSync depends-db on "+m.Name+": Deployment "+ns+"/db")
		if valueOf(t, m, ns, "app") != "" {
			t.Errorf("%s: the app was applied before its dependency was Ready", m.Name)
		}
	}

	makeAvailable(t, first, ns, "db")
	waitValue(t, first, ns, "app", "v1")
	waitReadiness(t, app, metav1.ConditionFalse, vidrav1alpha1.ReasonProgressing, "Ready on 1 of 2 clusters; waiting for "+second.Name+": waiting for GitSync depends-db")
	if valueOf(t, second, ns, "app") != "" {
		t.Errorf("%s: the app was applied while its dependency was not Ready there", second.Name)
	}
	makeAvailable(t, second, ns, "db")
	waitValue(t, second, ns, "app", "v1")
	waitReadiness(t, app, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded, "Ready on 2 of 2 clusters")

	// The dependency Ready, a new commit of the app goes straight through.
	repo.Commit(t, "main", map[string]string{"app/app.yaml": configMap("app", "v2")}, "app v2")
	requestSync(t, app)
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "app", "v2")
	}
}

// What dependsOn cannot be met is said, never waited out in silence: a sync that does not
// exist, one that delivers nothing to a cluster the dependent reaches, and a cycle, which
// stalls each of its syncs, naming it, until it is broken.
func TestDependsOnSaysWhatCannotBeMet(t *testing.T) {
	const ns = "gs-depends-bad"
	createNamespace(t, ns)
	first, second := fleet.Members[0], fleet.Members[1]
	srv := gitserver.New(t)
	repo := srv.Repo(t, "depends-bad")
	repo.Commit(t, "main", map[string]string{"a/a.yaml": configMap("a", "a"), "b/b.yaml": configMap("b", "b")}, "a and b")
	a := gitSync("depends-a", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "a"
		gs.Spec.Destination = everyMember(ns)
		gs.Spec.DependsOn = []vidrav1alpha1.SyncReference{{Kind: "HelmSync", Name: "no-such-sync"}}
	})
	create(t, a)
	waitWaiting(t, a, first.Name, "waiting for HelmSync no-such-sync on "+first.Name+": it does not exist")

	// b delivers to the first member only: a waits on the second, says so, and goes on
	// on the first.
	b := gitSync("depends-b", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "b"
		gs.Spec.Destination = toCluster(first.Name, ns)
	})
	create(t, b)
	update(t, a, func() { a.Spec.DependsOn = []vidrav1alpha1.SyncReference{{Kind: "GitSync", Name: b.Name}} })
	waitValue(t, first, ns, "a", "a")
	waitWaiting(t, a, second.Name, "waiting for GitSync depends-b on "+second.Name+": it delivers nothing to this cluster")

	// b depends on a: a cycle. Both stall, naming it; nothing they delivered goes.
	update(t, b, func() { b.Spec.DependsOn = []vidrav1alpha1.SyncReference{{Kind: "GitSync", Name: a.Name}} })
	condition(t, b, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonDependencyCycle)
	if msg := readyMessage(b); !strings.Contains(msg, "GitSync depends-b → GitSync depends-a → GitSync depends-b") {
		t.Errorf("Ready says %q, want the cycle named", msg)
	}
	requestSync(t, a)
	condition(t, a, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonDependencyCycle)
	if valueOf(t, first, ns, "a") != "a" || valueOf(t, first, ns, "b") != "b" {
		t.Error("a cycle removed what its syncs delivered")
	}

	// Broken, each goes on.
	update(t, b, func() { b.Spec.DependsOn = nil })
	ready(t, b)
	requestSync(t, a)
	testfleet.Eventually(t, 60*time.Second, a.Name+" no longer Stalled", func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a); err != nil {
			return false, err
		}
		return !meta.IsStatusConditionTrue(a.Status.Conditions, vidrav1alpha1.ConditionStalled), nil
	})
}

// waitWaiting waits until the sync's VidraResource on cluster waits for a dependency,
// saying part.
func waitWaiting(t testing.TB, s sync, cluster, part string) {
	t.Helper()
	var last string
	testfleet.Eventually(t, 60*time.Second, s.GetName()+" on "+cluster+" DependencyNotReady: …"+part+"…", func() (bool, error) {
		for _, vr := range resourcesOf(t, s) {
			if vr.Spec.Destination.Cluster != cluster {
				continue
			}
			c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
			if c == nil {
				return false, nil
			}
			last = c.Reason + ": " + c.Message
			return c.Status == metav1.ConditionFalse && c.Reason == vidrav1alpha1.ReasonDependencyNotReady && strings.Contains(c.Message, part), nil
		}
		return false, nil
	})
	if t.Failed() {
		t.Logf("last: %s", last)
	}
}
