package sourcesync_test

import (
	"strings"
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/alertreceiver"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// Each commit a GitSync delivers gets a status on the Git host: pending while it rolls
// out, success once Ready on every cluster, failure naming the cluster where it fails;
// an earlier commit's status stays.
func TestCommitStatusesSayWhereEachCommitStands(t *testing.T) {
	const ns = "gs-statuses"
	createNamespace(t, ns)
	gh := alertreceiver.NewGitHub(t, "gh-token")
	alertThrough(t, "statuses", vidrav1alpha1.AlertProviderGitHub, gh.RepoURL("org", "web"), "gh-token", gh.URL+"/")
	srv := gitserver.New(t)
	repo := srv.Repo(t, "statuses")
	good := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v1")}, "good")
	gs := gitSync("statuses", repo.URL(), func(gs *vidrav1alpha1.GitSync) { gs.Spec.Destination = everyMember(ns) })
	create(t, gs)

	ok := gh.WaitFor(t, good, "success")
	if ok.Context != "vidra/gitsync/statuses" || ok.Description != "Ready on 2 of 2 clusters" {
		t.Errorf("success = %+v", ok)
	}
	if first := gh.Statuses(good)[0]; first.State != "pending" || !strings.HasPrefix(first.Description, "rolling out: ") {
		t.Errorf("the commit's first status = %+v, want pending while it rolls out", first)
	}

	// A commit that fails on the second member alone (an object Vidra does not manage).
	broken := fleet.Members[1]
	unmanagedOn(t, broken, ns, "taken")
	bad := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v2"), "taken.yaml": configMap("taken", "v2")}, "bad")
	requestSync(t, gs)
	failed := gh.WaitFor(t, bad, "failure")
	if !strings.Contains(failed.Description, "failed on "+broken.Name) || failed.Context != "vidra/gitsync/statuses" {
		t.Errorf("failure = %+v", failed)
	}
	if s := gh.Statuses(good); s[len(s)-1].State != "success" {
		t.Errorf("the good commit's status became %+v", s[len(s)-1])
	}
}
