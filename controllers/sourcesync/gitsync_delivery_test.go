package sourcesync_test

import (
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
)

// A new commit on the followed branch reaches every selected cluster; the remote is asked
// for its revision at each sync and downloaded only once per commit.
func TestNewCommitReachesEverySelectedCluster(t *testing.T) {
	const ns = "gs-commit"
	createNamespace(t, ns)
	srv := gitserver.New(t)
	repo := srv.Repo(t, "apps")
	first := repo.Commit(t, "main", map[string]string{
		"deploy/web.yaml":    configMap("web", "v1"),
		"deploy/z/api.yml":   configMap("api", "v1"),
		"deploy/README.md":   "not a manifest",
		"other/ignored.yaml": configMap("ignored", "v1"),
	}, "first")

	gs := gitSync("commit", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "deploy"
		gs.Spec.Destination = everyMember(ns)
	})
	create(t, gs)
	readyAt(t, gs, "main@sha1:"+first)
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "web", "v1")
		waitValue(t, m, ns, "api", "v1")
		if v := valueOf(t, m, ns, "ignored"); v != "" {
			t.Errorf("%s got a file outside the path", m.Name)
		}
	}
	if n := len(resourcesOf(t, gs)); n != len(fleet.Members) {
		t.Errorf("%d VidraResources, want one per member (%d)", n, len(fleet.Members))
	}
	src := gs.Status.Source
	if src.Digest == "" || src.FetchedAt == nil {
		t.Errorf("status.source = %+v, want a digest and a fetch time", src)
	}

	// A sync of an unchanged revision asks, and fetches nothing.
	fetched := srv.Fetches("apps")
	asked := srv.Advertisements("apps")
	requestSync(t, gs)
	waitAsked(t, srv, "apps", asked+1)
	readyAt(t, gs, "main@sha1:"+first)
	if n := srv.Fetches("apps"); n != fetched {
		t.Errorf("an unchanged revision was fetched again: %d fetches, want %d", n, fetched)
	}

	second := repo.Commit(t, "main", map[string]string{"deploy/web.yaml": configMap("web", "v2")}, "second")
	requestSync(t, gs)
	readyAt(t, gs, "main@sha1:"+second)
	for _, m := range fleet.Members {
		waitValue(t, m, ns, "web", "v2")
		waitValue(t, m, ns, "api", "v1")
	}
	if n := srv.Fetches("apps"); n != fetched+1 {
		t.Errorf("%d fetches after a new commit, want %d: one per commit", n, fetched+1)
	}
	if gs.Status.Source.Digest == src.Digest {
		t.Error("status.source.digest did not change with the content")
	}
}

// A path holding kustomization.yaml is built with Kustomize: an overlay over a base.
func TestKustomizeOverlayIsBuilt(t *testing.T) {
	const ns = "gs-kustomize"
	createNamespace(t, ns)
	srv := gitserver.New(t)
	repo := srv.Repo(t, "kustomize")
	commit := repo.Commit(t, "main", map[string]string{
		"base/kustomization.yaml": "resources: [web.yaml]\n",
		"base/web.yaml":           configMap("web", "base"),
		"overlays/prod/kustomization.yaml": `resources: [../../base]
namePrefix: prod-
patches:
  - patch: |-
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: web}
      data: {value: overlay}
`,
	}, "kustomize")
	gs := gitSync("kustomize", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "./overlays/prod"
		gs.Spec.Destination = toCluster(fleet.Members[0].Name, ns)
	})
	create(t, gs)
	readyAt(t, gs, "main@sha1:"+commit)
	waitValue(t, fleet.Members[0], ns, "prod-web", "overlay")
	if v := valueOf(t, fleet.Members[0], ns, "web"); v != "" {
		t.Errorf("the base's own name was delivered too (value %q)", v)
	}
}

// A tag and a semver range name the commit they tag; a newer matching tag is delivered.
func TestTagAndSemverRefs(t *testing.T) {
	const ns = "gs-tags"
	createNamespace(t, ns)
	srv := gitserver.New(t)
	repo := srv.Repo(t, "tagged")
	one := repo.Commit(t, "main", map[string]string{"app.yaml": configMap("tagged", "1.0.0")}, "one")
	repo.TagAnnotated(t, "v1.0.0", one, "release 1.0.0")
	repo.Commit(t, "main", map[string]string{"app.yaml": configMap("tagged", "head")}, "unreleased")

	gs := gitSync("semver", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Ref = &vidrav1alpha1.GitRef{SemVer: ">=1.0.0 <2.0.0"}
		gs.Spec.Destination = toCluster(fleet.Members[1].Name, ns)
	})
	create(t, gs)
	readyAt(t, gs, "v1.0.0@sha1:"+one)
	waitValue(t, fleet.Members[1], ns, "tagged", "1.0.0")

	two := repo.Commit(t, "main", map[string]string{"app.yaml": configMap("tagged", "1.1.0")}, "two")
	repo.Tag(t, "v1.1.0", two)
	repo.Tag(t, "v2.0.0", two) // outside the range
	requestSync(t, gs)
	readyAt(t, gs, "v1.1.0@sha1:"+two)
	waitValue(t, fleet.Members[1], ns, "tagged", "1.1.0")
}
