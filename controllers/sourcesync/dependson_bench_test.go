package sourcesync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// BenchmarkDependsOnDelay: what dependsOn adds once the dependency is Ready. Each sample
// commits a new Deployment for the dependency and a new ConfigMap for the dependent,
// waits until the dependent waits for it on the first member, makes the Deployment
// available there (as its controller would), and times from the dependency's
// VidraResource being seen Ready to the dependent's ConfigMap applied. Both are polled
// every 5 ms, so a delay is known within about that.
func BenchmarkDependsOnDelay(b *testing.B) {
	const ns, samples = "bench-depends", 10
	createNamespace(b, ns)
	member := fleet.Members[0]
	srv := gitserver.New(b)
	repo := srv.Repo(b, "bench-depends")
	repo.Commit(b, "main", map[string]string{"db/db.yaml": deploymentOf("db", "1"), "app/app.yaml": configMap("app", "1")}, "1")
	db := gitSync("bench-depends-db", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "db"
		gs.Spec.Destination = toCluster(member.Name, ns)
	})
	app := gitSync("bench-depends-app", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "app"
		gs.Spec.Destination = toCluster(member.Name, ns)
		gs.Spec.DependsOn = []vidrav1alpha1.SyncReference{{Name: db.Name}}
	})
	create(b, db)
	create(b, app)
	makeAvailable(b, member, ns, "db")
	waitValue(b, member, ns, "app", "1")

	var delays []time.Duration
	for n := range b.N {
		for i := range samples {
			version := fmt.Sprintf("%d-%d", n, i+2)
			repo.Commit(b, "main", map[string]string{"db/db.yaml": deploymentOf("db", version), "app/app.yaml": configMap("app", version)}, version)
			// The dependency first: its sync names the new revision before the dependent
			// judges it.
			requestSync(b, db)
			testfleet.Poll(b, 5*time.Millisecond, 60*time.Second, "db "+version+" applied", func() (bool, error) {
				return !dependencyReady(b, db) && dbVersion(member, ns) == version, nil
			})
			requestSync(b, app)
			waitWaiting(b, app, member.Name, "waiting for GitSync "+db.Name+" on "+member.Name+": Deployment "+ns+"/db")
			makeAvailable(b, member, ns, "db")
			var ready time.Time
			testfleet.Poll(b, 5*time.Millisecond, 60*time.Second, "app "+version+" applied", func() (bool, error) {
				if ready.IsZero() && dependencyReady(b, db) {
					ready = time.Now()
				}
				return valueOf(b, member, ns, "app") == version, nil
			})
			if ready.IsZero() {
				ready = time.Now() // seen Ready only with the app applied: no delay to see
			}
			delays = append(delays, time.Since(ready))
		}
	}
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(delays[len(delays)*9/10].Microseconds())/1000, "p90-ms")
}

// deploymentOf is deployment(name) whose Pod template carries version: a new
// generation, not available until a test says so.
func deploymentOf(name, version string) string {
	return strings.Replace(deployment(name), "metadata: {labels: {app: "+name+"}}",
		"metadata: {labels: {app: "+name+"}, annotations: {version: \""+version+"\"}}", 1)
}

// dependencyReady says whether every VidraResource of s is Ready for its generation.
func dependencyReady(b *testing.B, s sync) bool {
	vrs := resourcesOf(b, s)
	for _, vr := range vrs {
		c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != vr.Generation {
			return false
		}
	}
	return len(vrs) > 0
}

// dbVersion is the version the Deployment db on m carries ("" when it has none yet).
func dbVersion(m *testfleet.Cluster, ns string) string {
	d := &appsv1.Deployment{}
	if err := m.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db"}, d); err != nil {
		return ""
	}
	return d.Spec.Template.Annotations["version"]
}
