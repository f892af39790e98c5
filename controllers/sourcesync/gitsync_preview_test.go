package sourcesync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/alertreceiver"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// waitPreview waits until the GitSync previews ref at commit, and returns the preview.
func waitPreview(t *testing.T, gs *vidrav1alpha1.GitSync, ref, commit string) vidrav1alpha1.RefPreview {
	t.Helper()
	var found vidrav1alpha1.RefPreview
	testfleet.Eventually(t, 60*time.Second, fmt.Sprintf("preview of %s at %s", ref, commit[:7]), func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(gs), gs); err != nil {
			return false, err
		}
		for _, p := range gs.Status.Previews {
			if p.Ref == ref && p.Revision == ref+"@sha1:"+commit {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// versions are the resourceVersions of the ConfigMaps in ns on every member, by
// member and name: what a preview must leave as it is.
func versions(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range fleet.Members {
		var list corev1.ConfigMapList
		if err := m.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			out[m.Name+"/"+cm.Name] = cm.ResourceVersion
		}
	}
	return out
}

// A branch and a pull request from a fork are previewed before they merge: built as a merge would
// build them, dry-run on both members against what the sync delivered, their counts in
// status.previews and in a commit status on their commit; nothing on a member changes.
// A change a member refuses fails its commit status.
func TestPreviewsShowWhatABranchWouldDoBeforeItMerges(t *testing.T) {
	const ns = "gs-previews"
	createNamespace(t, ns)
	gh := alertreceiver.NewGitHub(t, "gh-token")
	alertThrough(t, "previews", vidrav1alpha1.AlertProviderGitHub, gh.RepoURL("org", "web"), "gh-token", gh.URL+"/")
	srv := gitserver.New(t)
	repo := srv.Repo(t, "previews")
	main := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v1"), "gone.yaml": configMap("gone", "v1")}, "main")
	gs := gitSync("previews", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Destination = everyMember(ns)
		gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{Branch: "main"}
		gs.Spec.Previews = &vidrav1alpha1.Previews{Refs: []string{"refs/heads/preview/*", "refs/pull/*/head"}}
	})
	create(t, gs)
	readyAt(t, gs, "main@sha1:"+main)
	before := versions(t, ns)

	// A branch: web changes, gone goes, added comes, on both members.
	branch := repo.Commit(t, "preview/change", map[string]string{"web.yaml": configMap("web", "v2"), "gone.yaml": "", "added.yaml": configMap("added", "v1")}, "change")
	// A pull request from a fork, its commit on no branch of the repository, which a
	// member refuses.
	unmanagedOn(t, fleet.Members[1], ns, "taken")
	pull := repo.Commit(t, "fork", map[string]string{"taken.yaml": configMap("taken", "v2")}, "take")
	repo.SetRef(t, "refs/pull/1/head", pull)
	repo.SetRef(t, "refs/heads/fork", "")
	requestSync(t, gs)

	p := waitPreview(t, gs, "refs/heads/preview/change", branch)
	if p.Clusters != 2 || p.Changed != 2 || p.Added != 2 || p.Updated != 2 || p.Removed != 2 || p.Refused != 0 || p.Digest == "" {
		t.Errorf("preview of the branch = %+v, want 2 clusters changing, +2 ~2 -2 in all", p)
	}
	ok := gh.WaitFor(t, branch, "success")
	if ok.Context != "vidra/preview/previews" || ok.Description != "2 of 2 clusters change: +2 ~2 -2" {
		t.Errorf("the branch's commit status = %+v", ok)
	}
	refused := waitPreview(t, gs, "refs/pull/1/head", pull)
	if refused.Refused != 1 || refused.Clusters != 2 {
		t.Errorf("preview of the pull request = %+v, want 1 of 2 clusters refusing it", refused)
	}
	failed := gh.WaitFor(t, pull, "failure")
	if failed.Context != "vidra/preview/previews" {
		t.Errorf("the pull request's commit status = %+v", failed)
	}

	// Nothing was applied: every object as it was, the added one nowhere.
	after := versions(t, ns)
	for key, rv := range before {
		if after[key] != rv {
			t.Errorf("%s changed (resourceVersion %s, was %s)", key, after[key], rv)
		}
	}
	for _, m := range fleet.Members {
		err := m.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "added"}, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("the preview's new object on %s: %v", m.Name, err)
		}
	}
	if v := valueOf(t, fleet.Members[0], ns, "web"); v != "v1" {
		t.Errorf("web = %q on %s, want v1 still", v, fleet.Members[0].Name)
	}
}

// Refs to preview that cannot be listed are told on the sync, by a PreviewFailed Event
// naming what is wrong; the sync's delivery goes on.
func TestPreviewsThatCannotBeListedAreToldOnTheSync(t *testing.T) {
	const ns = "gs-previews-bad"
	createNamespace(t, ns)
	srv := gitserver.New(t)
	repo := srv.Repo(t, "previews-bad")
	main := repo.Commit(t, "main", map[string]string{"web.yaml": configMap("web", "v1")}, "main")
	gs := gitSync("previews-bad", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Destination = everyMember(ns)
		gs.Spec.Previews = &vidrav1alpha1.Previews{Refs: []string{"refs/heads/[preview"}}
	})
	create(t, gs)
	readyAt(t, gs, "main@sha1:"+main)
	waitEvent(t, gs, vidrav1alpha1.EventPreviewFailed, "list the refs to preview", `"refs/heads/[preview" is not a glob`)
}
