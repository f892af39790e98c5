package sourcesync_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/hooks"
	"github.com/vidra-operator/vidra/internal/source/gitpush"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// pushToReady measures, over samples commits, the time from a commit being pushed to the
// sync being Ready at it with its ConfigMap changed on every member. notify tells the
// operator of the push (a webhook), or does nothing (polling).
func pushToReady(b *testing.B, name string, interval time.Duration, samples int, notify func(repo *gitserver.Repo, commit string)) {
	poll := notify == nil
	ns := "bench-" + name
	createNamespace(b, ns)
	srv := gitserver.New(b)
	repo := srv.Repo(b, name)
	first := repo.Commit(b, "main", map[string]string{"cm.yaml": configMap(name, "v0")}, "v0")
	gs := gitSync(name, repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Destination = everyMember(ns)
		gs.Spec.Interval = &metav1.Duration{Duration: interval}
	})
	create(b, gs)
	readyAt(b, gs, "main@sha1:"+first)

	var latencies []time.Duration
	for n := range b.N {
		for i := range samples {
			value := fmt.Sprintf("v%d-%d", n, i+1)
			var wait time.Duration
			if poll {
				// A push lands at any point of the interval, not just after a look: the
				// samples spread evenly over it.
				wait = interval * time.Duration(2*i+1) / time.Duration(2*samples)
				time.Sleep(wait)
			}
			commit := repo.Commit(b, "main", map[string]string{"cm.yaml": configMap(name, value)}, value)
			start := time.Now()
			if !poll {
				notify(repo, commit)
			}
			for _, m := range fleet.Members {
				testfleet.Poll(b, 5*time.Millisecond, interval+30*time.Second, "ConfigMap at "+value+" on "+m.Name, func() (bool, error) {
					return valueOf(b, m, ns, name) == value, nil
				})
			}
			readyAt(b, gs, "main@sha1:"+commit)
			latencies = append(latencies, time.Since(start))
			b.Logf("push %d: %v after the last delivery, Ready everywhere %v later", i+1, wait.Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
		}
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*9/10].Microseconds())/1000, "p90-ms")
	b.ReportMetric(float64(srv.Fetches(name))/float64(b.N*samples+1), "fetches/commit")
}

// BenchmarkGitPushToReadyWithWebhook: a push notification, signed as GitHub signs it, to
// Ready on every member. The sync's interval is an hour: only the webhook brings the
// commit.
func BenchmarkGitPushToReadyWithWebhook(b *testing.B) {
	key := []byte("bench-push-key")
	createSecret(b, "bench-push-key", map[string][]byte{hooks.KeyField: key})
	// Pushes come one after the other here, each as soon as the last is Ready: at the
	// default pace (one per repository every 10s) most would wait for their turn.
	receiver := &hooks.Receiver{Hub: fleet.Hub.Client, Secrets: fleet.Hub.Client,
		KeySecret: types.NamespacedName{Namespace: namespace, Name: "bench-push-key"}, Log: logr.Discard(),
		PushInterval: time.Millisecond}
	receiverSrv := httptest.NewServer(receiver.Handler())
	b.Cleanup(receiverSrv.Close)
	pushToReady(b, "pushed", time.Hour, 20, func(repo *gitserver.Repo, commit string) {
		body := fmt.Appendf(nil, `{"ref":"refs/heads/main","after":%q,"repository":{"clone_url":%q}}`, commit, repo.URL())
		repoKey := gitpush.Key(key, gitpush.RepositoryKey(repo.URL()))
		if code := post(b, receiverSrv.URL+hooks.GitPath, body, gitHubHeaders(repoKey, body, commit)); code != http.StatusAccepted {
			b.Fatalf("push: HTTP %d", code)
		}
	})
}

// BenchmarkGitPushToReadyByPolling: the same without a webhook, with spec.interval 10s:
// the sync asks the remote for its revision every 10 s.
func BenchmarkGitPushToReadyByPolling(b *testing.B) {
	pushToReady(b, "polled", 10*time.Second, 6, nil)
}

// BenchmarkFetchesPerRevision: 20 GitSyncs of one monorepo, each its own directory, over
// 3 commits: the Git server's upload-pack requests per commit (1 is the promise), and
// the ref advertisements each sync's look costs.
func BenchmarkFetchesPerRevision(b *testing.B) {
	const ns, syncs, commits = "bench-monorepo", 20, 3
	createNamespace(b, ns)
	for n := range b.N {
		srv := gitserver.New(b)
		repo := srv.Repo(b, "mono")
		files := func(value string) map[string]string {
			out := map[string]string{}
			for i := range syncs {
				out[fmt.Sprintf("apps/%02d/cm.yaml", i)] = configMap(fmt.Sprintf("bench-%d-%02d", n, i), value)
			}
			return out
		}
		all := make([]*vidrav1alpha1.GitSync, syncs)
		var last string
		for c := range commits {
			last = repo.Commit(b, "main", files(fmt.Sprint(c)), fmt.Sprint(c))
			for i := range syncs {
				if c == 0 {
					all[i] = gitSync(fmt.Sprintf("bench-%d-%02d", n, i), repo.URL(), func(gs *vidrav1alpha1.GitSync) {
						gs.Spec.Source.Path = fmt.Sprintf("apps/%02d", i)
						gs.Spec.Destination = toCluster(fleet.Members[i%2].Name, ns)
					})
					create(b, all[i])
				} else {
					requestSync(b, all[i])
				}
			}
			for _, gs := range all {
				readyAt(b, gs, "main@sha1:"+last)
			}
		}
		b.ReportMetric(float64(srv.Fetches("mono"))/commits, "fetches/commit")
		b.ReportMetric(float64(srv.Advertisements("mono"))/(syncs*commits), "ref-asks/sync-look")
		for _, gs := range all {
			_ = fleet.Hub.Client.Delete(context.Background(), gs)
		}
	}
}
