package sourcesync_test

import (
	"fmt"
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// Fifty GitSyncs of one monorepo, each delivering its own directory, fetch it once per
// commit: the Git server sees one upload-pack request per commit, however many syncs.
func TestFiftyGitSyncsFetchTheRepositoryOncePerCommit(t *testing.T) {
	const ns, syncs = "gs-monorepo", 50
	createNamespace(t, ns)
	srv := gitserver.New(t)
	repo := srv.Repo(t, "monorepo")
	files := func(value string) map[string]string {
		out := map[string]string{}
		for i := range syncs {
			out[fmt.Sprintf("apps/app-%02d/cm.yaml", i)] = configMap(fmt.Sprintf("app-%02d", i), value)
		}
		return out
	}
	commits := []string{repo.Commit(t, "main", files("v1"), "v1")}
	all := make([]*vidrav1alpha1.GitSync, syncs)
	for i := range syncs {
		all[i] = gitSync(fmt.Sprintf("mono-%02d", i), repo.URL(), func(gs *vidrav1alpha1.GitSync) {
			gs.Spec.Source.Path = fmt.Sprintf("apps/app-%02d", i)
			gs.Spec.Destination = toCluster(fleet.Members[i%2].Name, ns)
		})
		create(t, all[i])
	}
	check := func(value string) {
		t.Helper()
		for i, gs := range all {
			readyAt(t, gs, "main@sha1:"+commits[len(commits)-1])
			waitValue(t, fleet.Members[i%2], ns, fmt.Sprintf("app-%02d", i), value)
		}
		if n := srv.Fetches("monorepo"); n != len(commits) {
			t.Errorf("the server saw %d fetches for %d commits and %d syncs, want one per commit", n, len(commits), syncs)
		}
		t.Logf("%d syncs, %d commits: %d fetches, %d ref advertisements", syncs, len(commits), srv.Fetches("monorepo"), srv.Advertisements("monorepo"))
	}
	check("v1")

	commits = append(commits, repo.Commit(t, "main", files("v2"), "v2"))
	for _, gs := range all {
		requestSync(t, gs)
	}
	check("v2")
}
