package ui_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// createSync writes a sync and then its status, on its latest version (the operator may
// have marked it suspended meanwhile), and deletes it when the test ends.
func createSync(t *testing.T, sync vidrav1alpha1.Sync, source vidrav1alpha1.SourceStatus) {
	t.Helper()
	ctx := context.Background()
	if err := fleet.Hub.Client.Create(ctx, sync); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), sync) })
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := fleet.Hub.Client.Get(ctx, ctrlclient.ObjectKeyFromObject(sync), sync); err != nil {
			return err
		}
		status := sync.(interface {
			SourceStatus() *vidrav1alpha1.SourceSyncStatus
		}).SourceStatus()
		status.Source = &source
		status.Bundles = []vidrav1alpha1.BundleStatus{{ID: "bundle", Revision: source.Revision, Checksum: "fedcba9876543210fedc"}}
		return fleet.Hub.Client.Status().Update(ctx, sync)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The syncs page lists the syncs of every kind, each with its kind, source and the
// revision it fetched (a HelmSync: its repository, chart and chart version); the graph has a node per sync, linked to its VidraResources; and
// "Sync now" asks a GitSync for a sync as it does an InfrahubSync.
func TestTheSyncsPageShowsEveryKindOfSync(t *testing.T) {
	ctx := context.Background()
	commit := "main@sha1:0123456789abcdef0123456789abcdef01234567"
	// Suspended, so the operator fetches nothing from the made-up sources.
	options := vidrav1alpha1.SyncOptions{Suspend: true}
	createSync(t, &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Spec:       vidrav1alpha1.GitSyncSpec{Source: vidrav1alpha1.GitSource{URL: "https://git.example.com/site.git"}, SyncOptions: options},
	}, vidrav1alpha1.SourceStatus{Revision: commit})
	createSync(t, &vidrav1alpha1.OCISync{
		ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Spec:       vidrav1alpha1.OCISyncSpec{Source: vidrav1alpha1.OCISource{URL: "oci://registry.example.com/site"}, SyncOptions: options},
	}, vidrav1alpha1.SourceStatus{Revision: "v1@sha256:abcdef"})
	createSync(t, &vidrav1alpha1.HelmSync{
		ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Spec: vidrav1alpha1.HelmSyncSpec{Source: vidrav1alpha1.HelmSource{RepoURL: "https://charts.example.com/stable", Chart: "site-chart"},
			SyncOptions: options},
	}, vidrav1alpha1.SourceStatus{Revision: "2.3.4"})
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "site-from-git", Labels: map[string]string{vidrav1alpha1.GitSyncLabel: "site"}},
		Spec: vidrav1alpha1.VidraResourceSpec{Suspend: true, Destination: vidrav1alpha1.Destination{Cluster: "nowhere"},
			Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"},
	}
	if err := fleet.Hub.Client.Create(ctx, vr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), vr) })

	url, key := serve(t, fleet.Hub.Kubeconfig)
	c := keyedClient(t, key)
	var page string
	testfleet.Eventually(t, 10*time.Second, "both syncs on the page", func() (bool, error) {
		page = body(t, c, url+"/view/syncs")
		return strings.Contains(page, commit) && strings.Contains(page, "v1@sha256:abcdef") && strings.Contains(page, "<td>2.3.4</td>") &&
			strings.Contains(page, "site-from-git"), nil
	})
	for _, want := range []string{
		`data-sync="gs/site" data-kind="GitSync"`, `data-sync="ocis/site" data-kind="OCISync"`, `data-sync="hs/site" data-kind="HelmSync"`,
		"<td>GitSync</td><td>site</td>", "<td>OCISync</td><td>site</td>", "<td>HelmSync</td><td>site</td>",
		"https://git.example.com/site.git", "oci://registry.example.com/site", "fedcba987654",
		"https://charts.example.com/stable · chart site-chart", "chart site-chart · at 2.3.4",
		`action="/syncs/gitsyncs/site/sync"`, `action="/syncs/ocisyncs/site/sync"`, `action="/syncs/helmsyncs/site/sync"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the syncs page does not show %q:\n%s", want, page)
		}
	}
	// Sections come in SyncKinds order: the GitSync's, then the OCISync's.
	git, oci := strings.Index(page, `data-sync="gs/site"`), strings.Index(page, `data-sync="ocis/site"`)
	if git < 0 || oci < git || !strings.Contains(page[git:oci], "site-from-git") || strings.Contains(page[oci:], "site-from-git") {
		t.Errorf("the GitSync's VidraResource is not listed under it alone:\n%s", page)
	}
	graph := body(t, c, url+"/view/graph")
	for _, node := range []string{`data-node="gs/site"`, `data-node="ocis/site"`, `data-node="hs/site"`, `data-node="vr/site-from-git"`, "<title>GitSync gs/site</title>"} {
		if !strings.Contains(graph, node) {
			t.Errorf("the graph has no %s:\n%s", node, graph)
		}
	}
	if bundle := body(t, c, url+"/view/bundles/site-from-git"); !strings.Contains(bundle, `from GitSync <a href="/syncs">site</a>`) {
		t.Errorf("the bundle's page does not name its GitSync:\n%s", bundle)
	}

	m := regexp.MustCompile(`name="token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no action token on the page:\n%s", page)
	}
	form := map[string][]string{"token": {m[1]}}
	if code := statusOf(c.PostForm(url+"/syncs/deployments/site/sync", form)); code != http.StatusNotFound {
		t.Errorf("Sync now of a kind that is no sync: HTTP %d, want 404", code)
	}
	if code := statusOf(c.PostForm(url+"/syncs/gitsyncs/site/sync", form)); code != http.StatusNoContent {
		t.Fatalf("Sync now of the GitSync: HTTP %d, want 204", code)
	}
	got, other := &vidrav1alpha1.GitSync{}, &vidrav1alpha1.OCISync{}
	if err := fleet.Hub.Client.Get(ctx, ctrlclient.ObjectKey{Name: "site"}, got); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Get(ctx, ctrlclient.ObjectKey{Name: "site"}, other); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[vidrav1alpha1.RequestedAtAnnotation] == "" || other.Annotations[vidrav1alpha1.RequestedAtAnnotation] != "" {
		t.Errorf("Sync now of gitsyncs/site: GitSync requested %q, OCISync of that name requested %q; want the GitSync only",
			got.Annotations[vidrav1alpha1.RequestedAtAnnotation], other.Annotations[vidrav1alpha1.RequestedAtAnnotation])
	}
}

// A GitSync's previews show on the syncs page: each ref, its commit, the clusters it
// changes and refuses it.
func TestTheSyncsPageShowsAGitSyncsPreviews(t *testing.T) {
	ctx := context.Background()
	gs := &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: "previewed"},
		Spec: vidrav1alpha1.GitSyncSpec{Source: vidrav1alpha1.GitSource{URL: "https://git.example.com/site.git"},
			Previews: &vidrav1alpha1.Previews{Refs: []string{"refs/pull/*/head"}}, SyncOptions: vidrav1alpha1.SyncOptions{Suspend: true}},
	}
	createSync(t, gs, vidrav1alpha1.SourceStatus{Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567"})
	const rev = "refs/pull/7/head@sha1:7777777777777777777777777777777777777777"
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := fleet.Hub.Client.Get(ctx, ctrlclient.ObjectKeyFromObject(gs), gs); err != nil {
			return err
		}
		gs.Status.Previews = []vidrav1alpha1.RefPreview{{Ref: "refs/pull/7/head", Revision: rev, Clusters: 3, Changed: 2, Refused: 1, Added: 1, Updated: 2}}
		return fleet.Hub.Client.Status().Update(ctx, gs)
	})
	if err != nil {
		t.Fatal(err)
	}
	url, key := serve(t, fleet.Hub.Kubeconfig)
	c := keyedClient(t, key)
	var page string
	testfleet.Eventually(t, 10*time.Second, "the preview on the page", func() (bool, error) {
		page = body(t, c, url+"/view/syncs")
		return strings.Contains(page, `data-preview="refs/pull/7/head"`), nil
	})
	for _, want := range []string{"<code>" + rev + "</code>", "<td>2 of 3</td>", "<td>+1 ~2 -0</td>", `<span class="badge failed">1</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the syncs page does not show %q:\n%s", want, page)
		}
	}
}
