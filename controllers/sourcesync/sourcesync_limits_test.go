package sourcesync_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
)

// A revision over one of the operator's bounds stalls its sync, naming the bound, and
// changes nothing delivered; the next revision within the bounds is delivered again.
func TestARevisionOverABoundStallsAndChangesNothing(t *testing.T) {
	const ns = "gs-limits"
	createNamespace(t, ns)
	member := fleet.Members[0]
	srv := gitserver.New(t)
	repo := srv.Repo(t, "growing")
	repo.Commit(t, "main", map[string]string{"app/web.yaml": configMap("web", "small")}, "small")
	gs := gitSync("growing", repo.URL(), func(gs *vidrav1alpha1.GitSync) {
		gs.Spec.Source.Path = "app"
		gs.Spec.Destination = toCluster(member.Name, ns)
	})
	create(t, gs)
	ready(t, gs)
	waitValue(t, member, ns, "web", "small")

	many := map[string]string{"app/web.yaml": configMap("web", "too many files")}
	for i := range maxFiles + 10 {
		many[fmt.Sprintf("docs/note-%03d.txt", i)] = "a file the bound counts"
	}
	repo.Commit(t, "main", many, "too many files")
	requestSync(t, gs)
	condition(t, gs, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonLimitExceeded)
	if msg := readyMessage(gs); !strings.Contains(msg, fmt.Sprint(maxFiles)) {
		t.Errorf("Ready says %q, want it to name the bound (%d files)", msg, maxFiles)
	}
	waitEvent(t, gs, vidrav1alpha1.ReasonLimitExceeded)
	if v := valueOf(t, member, ns, "web"); v != "small" {
		t.Errorf("the delivered ConfigMap has %q, want it unchanged", v)
	}
	// Looked at again, the same revision is not downloaded again to fail the same way.
	fetched, asked := srv.Fetches("growing"), srv.Advertisements("growing")
	requestSync(t, gs)
	waitAsked(t, srv, "growing", asked+1)
	// The look has asked the remote; a download would follow within milliseconds.
	time.Sleep(time.Second)
	condition(t, gs, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonLimitExceeded)
	if n := srv.Fetches("growing"); n != fetched {
		t.Errorf("a revision over the bound was fetched again: %d fetches, want %d", n, fetched)
	}

	deleted := map[string]string{"app/web.yaml": configMap("web", "small again")}
	for name := range many {
		if strings.HasPrefix(name, "docs/") {
			deleted[name] = ""
		}
	}
	fixed := repo.Commit(t, "main", deleted, "fewer files")
	requestSync(t, gs)
	readyAt(t, gs, "main@sha1:"+fixed)
	waitValue(t, member, ns, "web", "small again")
}

// An artifact over the operator's bound is refused before it is downloaded.
func TestAnArtifactOverTheBoundIsRefused(t *testing.T) {
	const ns = "ocis-limits"
	createNamespace(t, ns)
	reg := ociregistry.New(t)
	big := make([]byte, maxArtifact+1)
	for i := range big {
		big[i] = byte(i*7919 + i/13) // poorly compressible
	}
	digest := reg.PushLayer(t, "manifests/big", "big", "application/vnd.cncf.flux.content.v1.tar+gzip", big)
	os := ociSync("big", reg.URL("manifests/big"), func(os *vidrav1alpha1.OCISync) {
		os.Spec.Source.Ref = &vidrav1alpha1.OCIRef{Tag: "big"}
		os.Spec.Destination = toCluster(fleet.Members[1].Name, ns)
	})
	create(t, os)
	condition(t, os, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonLimitExceeded)
	if msg := readyMessage(os); !strings.Contains(msg, digest) {
		t.Errorf("Ready says %q, want it to name the artifact", msg)
	}
	if n := len(resourcesOf(t, os)); n != 0 {
		t.Errorf("%d VidraResources made of an artifact over the bound", n)
	}
}
