package ui_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/internal/ui"
)

var fleet *testfleet.Fleet

// One member, left for the test to enroll, so that the page sees it arrive.
func TestMain(m *testing.M) {
	os.Exit(testoperator.Main(m, testfleet.Options{Members: 1}, testoperator.Options{Unenrolled: 1},
		func(f *testfleet.Fleet, _ *testoperator.Operator) { fleet = f }))
}

// serve runs the UI with a kubeconfig's credentials on 127.0.0.1 and returns its base URL
// and its access key (the printed URL carries #key=).
func serve(t *testing.T, kubeconfig []byte) (string, string) {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := testfleet.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := ui.New(ctx, ui.Options{Config: cfg, Scheme: scheme, Log: logr.Discard(), OperatorNamespace: testoperator.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(listener) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + listener.Addr().String(), s.Key()
}

// keyedClient is an HTTP client that sends the key as the UI's pages do (a bearer
// token), does not follow redirects, and fails the test if the UI ever sets a cookie.
func keyedClient(t *testing.T, key string) *http.Client {
	t.Helper()
	return &http.Client{
		Transport:     bearer{t: t, key: key},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type bearer struct {
	t   *testing.T
	key string
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && len(resp.Header.Values("Set-Cookie")) > 0 {
		b.t.Errorf("%s %s set a cookie: %v", req.Method, req.URL.Path, resp.Header.Values("Set-Cookie"))
	}
	return resp, err
}

// body reads a response of c to GET url and fails the test unless it is 200.
func body(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d\n%s", url, resp.StatusCode, b)
	}
	return string(b)
}

// browser starts headless Chromium from Debian's package (make browser installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			t.Fatal("no chromium on PATH: run make browser (it installs Debian's chromium package), or set CHROMIUM")
		}
	}
	// A fresh profile, removed at the end as far as the browser's last writes allow.
	profile, err := os.MkdirTemp("", "vidra-ui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(profile) })
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 900),
		// Containers often have a small /dev/shm, which crashes Chromium's renderer.
		chromedp.Flag("disable-dev-shm-usage", true),
		// A first start with a fresh profile, beside the other packages' control planes on
		// two cores, can take longer than chromedp's 20 s.
		chromedp.WSURLReadTimeout(2 * time.Minute),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshots go to bin/ui-screenshots, kept as the test's output.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "bin", "ui-screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", filepath.Join(dir, name))
}

// text waits until the element selector holds want, as a person would see it.
func text(ctx context.Context, t *testing.T, what, selector, want string, timeout time.Duration) {
	t.Helper()
	var got string
	testfleet.Eventually(t, timeout, what, func() (bool, error) {
		// Each look has a deadline: a wedged browser fails the test, it does not hang it.
		lookCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var nodes int
		if err := chromedp.Run(lookCtx, chromedp.Evaluate(fmt.Sprintf(`document.querySelectorAll(%q).length`, selector), &nodes)); err != nil || nodes == 0 {
			return false, err
		}
		if err := chromedp.Run(lookCtx, chromedp.Text(selector, &got, chromedp.ByQuery)); err != nil {
			return false, err
		}
		return strings.Contains(got, want), nil
	})
}

// What a person sees in a real browser: a cluster enrolled while the page is open
// appears without a reload; a bundle's page lists its objects; a cluster whose API
// server stops answering turns Unreachable by itself, and Engaged again; the graph links
// the bundle to its cluster and objects.
func TestTheFleetIsLiveInABrowser(t *testing.T) {
	ctx := browser(t)
	url, key := serve(t, fleet.Hub.Kubeconfig)
	member := fleet.Members[0]

	if err := chromedp.Run(ctx, chromedp.Navigate(url+"/#key="+key)); err != nil {
		t.Fatal(err)
	}
	text(ctx, t, "the live indicator", "#live", "live", 10*time.Second)
	text(ctx, t, "an empty fleet", "main", "No clusters are enrolled", 10*time.Second)
	text(ctx, t, "the right to deliver to the hub itself", "[data-deliver-local] [data-deliver]", "yes", 10*time.Second)
	// The key left the address bar for the tab's sessionStorage; no cookie holds it.
	var where, cookies, stored string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`location.href`, &where), chromedp.Evaluate(`document.cookie`, &cookies),
		chromedp.Evaluate(`sessionStorage.getItem("vidra-ui-key") || ""`, &stored)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(where, key) || cookies != "" || stored != key {
		t.Errorf("after opening the printed URL: address %q, cookies %q, sessionStorage %q; want the key in sessionStorage only", where, cookies, stored)
	}
	// Another tab, which has not opened the printed URL, gets nothing.
	other, cancelOther := chromedp.NewContext(ctx)
	defer cancelOther()
	if err := chromedp.Run(other, chromedp.Navigate(url+"/")); err != nil {
		t.Fatal(err)
	}
	text(other, t, "a tab without the key told to open the printed URL", "main", "Open the URL kubectl vidra ui printed", 10*time.Second)
	cancelOther()

	// Enrolled while the page is open: it appears, Engaged, without a reload.
	if err := testoperator.Enroll(context.Background(), fleet.Hub, member); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`tr[data-cluster=%q]`, member.Name)
	text(ctx, t, "the member Engaged on the page", row+" [data-phase]", "Engaged", 30*time.Second)
	text(ctx, t, "its version", row, "v1.36.0", 10*time.Second)
	text(ctx, t, "the right to deliver there", row+" [data-deliver]", "yes", 10*time.Second)
	screenshot(ctx, t, "fleet.png")

	// A bundle and its objects.
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			vidrav1alpha1.BundleVariablesAnnotation: `{"cluster.name":"` + member.Name + `","token":"<Secret web-token>"}`}},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Destination: vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "web"},
			Manifest:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: live}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n",
		},
	}
	if err := fleet.Hub.Client.Create(context.Background(), vr); err != nil {
		t.Fatal(err)
	}
	text(ctx, t, "the bundle counted on its cluster", row, "1 / 1", 30*time.Second)
	if err := chromedp.Run(ctx, chromedp.Navigate(url+"/bundles/web")); err != nil {
		t.Fatal(err)
	}
	text(ctx, t, "the bundle Ready", "[data-ready]", "True", 30*time.Second)
	text(ctx, t, "its ConfigMap", `tr[data-object="ConfigMap/settings"]`, "Current", 10*time.Second)
	text(ctx, t, "its Service", `tr[data-object="Service/web"]`, "Current", 10*time.Second)
	text(ctx, t, "what it was built with", `tr[data-variable="cluster.name"]`, member.Name, 10*time.Second)
	text(ctx, t, "a Secret's variable, its value not shown", `tr[data-variable="token"]`, "<Secret web-token>", 10*time.Second)
	screenshot(ctx, t, "bundle.png")

	// The member's API server stops answering: the page says so by itself.
	if err := chromedp.Run(ctx, chromedp.Navigate(url+"/")); err != nil {
		t.Fatal(err)
	}
	text(ctx, t, "the member Engaged", row+" [data-phase]", "Engaged", 30*time.Second)
	member.PauseInTest(t)
	text(ctx, t, "the member Unreachable on the page", row+" [data-phase]", "Unreachable", 60*time.Second)
	screenshot(ctx, t, "unreachable.png")
	if err := member.Resume(); err != nil {
		t.Fatal(err)
	}
	text(ctx, t, "the member Engaged again", row+" [data-phase]", "Engaged", 60*time.Second)

	if err := chromedp.Run(ctx, chromedp.Navigate(url+"/graph")); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"vr/web", "vc/" + member.Name, "obj/web/ConfigMap web/settings", "obj/web/Service web/web"} {
		testfleet.Eventually(t, 10*time.Second, "graph node "+node, func() (bool, error) {
			var n int
			err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`document.querySelectorAll(%q).length`, fmt.Sprintf(`[data-node=%q]`, node)), &n))
			return n == 1, err
		})
	}
	var edges, objects int
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`document.querySelectorAll("svg line.edge").length`, &edges),
		chromedp.Evaluate(`document.querySelectorAll('[data-node^="obj/web/"]').length`, &objects)); err != nil {
		t.Fatal(err)
	}
	if objects < 2 || edges != 1+objects {
		t.Errorf("%d edges and %d objects in the graph; want the bundle to its cluster, and the cluster to each object", edges, objects)
	}
	screenshot(ctx, t, "graph.png")

	// "Sync now", clicked: the page sends the action with the key, as the caller.
	ihs := &vidrav1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: "clicked"},
		Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source: vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub.example.com", ArtefactName: "web"},
		},
	}
	if err := fleet.Hub.Client.Create(context.Background(), ihs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), ihs) })
	if err := chromedp.Run(ctx, chromedp.Navigate(url+"/syncs")); err != nil {
		t.Fatal(err)
	}
	button := `section[data-sync="ihs/clicked"] button`
	text(ctx, t, "the sync's button", button, "Sync now", 30*time.Second)
	if err := chromedp.Run(ctx, chromedp.Click(button, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 10*time.Second, "the click to request a sync", func() (bool, error) {
		got := &vidrav1alpha1.InfrahubSync{}
		err := fleet.Hub.Client.Get(context.Background(), ctrlclient.ObjectKey{Name: "clicked"}, got)
		return err == nil && got.Annotations[vidrav1alpha1.RequestedAtAnnotation] != "", err
	})
}

// A user who may not read InfrahubSyncs or Events is told so on the page, and sees what
// they may read.
func TestAViewTheCallerMayNotReadSaysSo(t *testing.T) {
	kubeconfig, err := fleet.Hub.AddUser("fleet-viewer")
	if err != nil {
		t.Fatal(err)
	}
	rbac := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: vidra-fleet-viewer}
rules:
- apiGroups: [infrahub.operators.com]
  resources: [vidraclusters, vidraresources]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: vidra-fleet-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vidra-fleet-viewer}
subjects: [{kind: User, name: fleet-viewer, apiGroup: rbac.authorization.k8s.io}]
`
	if _, err := fleet.Hub.Kubectl(context.Background(), []byte(rbac), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	url, key := serve(t, kubeconfig)
	c := keyedClient(t, key)
	page := body(t, c, url+"/view/syncs")
	for _, resource := range []string{"infrahubsyncs", "gitsyncs", "ocisyncs", "helmsyncs"} {
		if !strings.Contains(page, "you may not list "+resource+".infrahub.operators.com on the hub") {
			t.Errorf("the syncs page does not say the user may not read %s:\n%s", resource, page)
		}
	}
	if page := body(t, c, url+"/view/"); strings.Contains(page, "data-denied") {
		t.Errorf("the fleet page denies what the user may read:\n%s", page)
	}
	// Without the key, or with another, no view, event or action is served; the page
	// itself is a shell without data (its script brings the key).
	for _, path := range []string{"/view/", "/view/syncs", "/view/graph", "/view/bundles/web", "/events"} {
		if code := statusOf(http.Get(url + path)); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the key: %d, want 401", path, code)
		}
		if code := statusOf(keyedClient(t, "0123456789abcdef0123456789abcdef").Get(url + path)); code != http.StatusForbidden {
			t.Errorf("GET %s with another key: %d, want 403", path, code)
		}
	}
	if code := statusOf(http.PostForm(url+"/syncs/infrahubsyncs/site/sync", nil)); code != http.StatusUnauthorized {
		t.Errorf("POST Sync now without the key: %d, want 401", code)
	}
	if shell := body(t, http.DefaultClient, url+"/"); strings.Contains(shell, "<table") || strings.Contains(shell, "data-deliver") {
		t.Errorf("the page without the key holds data:\n%s", shell)
	}
	// From another host name (DNS rebinding), nothing is served, not even the shell.
	for _, path := range []string{"/", "/view/"} {
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		req.Host = "rebound.example.com"
		if code := statusOf(keyedClient(t, key).Do(req)); code != http.StatusForbidden {
			t.Errorf("GET %s with another Host: %d, want 403", path, code)
		}
	}
}

// The syncs page shows a sync's artifacts and rollout, and its "Sync now" button asks for
// a sync with the caller's credentials.
func TestTheSyncsPageShowsArtifactsAndRequestsASync(t *testing.T) {
	ctx := context.Background()
	ihs := &vidrav1alpha1.InfrahubSync{
		// An earlier webhook request's trace context, which a sync asked for now must not join.
		ObjectMeta: metav1.ObjectMeta{Name: "site", Annotations: map[string]string{
			tracing.TraceparentAnnotation: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracing.TracestateAnnotation: "k=v"}},
		Spec: vidrav1alpha1.InfrahubSyncSpec{
			Source: vidrav1alpha1.InfrahubSyncSource{InfrahubAPIURL: "https://infrahub.example.com", ArtefactName: "web", TargetBranch: "main"},
		},
	}
	if err := fleet.Hub.Client.Create(ctx, ihs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), ihs) })
	// The operator syncs it meanwhile (and fails to reach the made-up Infrahub, which
	// leaves these fields as they are): the status is written on its latest version.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := fleet.Hub.Client.Get(ctx, ctrlclient.ObjectKeyFromObject(ihs), ihs); err != nil {
			return err
		}
		ihs.Status.Artifacts = []vidrav1alpha1.BundleStatus{{ID: "a1", Name: "web-config", Target: "paris", Checksum: "0123456789abcdef0123"}}
		ihs.Status.Rollout = &vidrav1alpha1.RolloutStatus{Revision: 2, Phase: vidrav1alpha1.RolloutProgressing, Wave: "canary", Updated: 1, Total: 3}
		return fleet.Hub.Client.Status().Update(ctx, ihs)
	})
	if err != nil {
		t.Fatal(err)
	}
	url, key := serve(t, fleet.Hub.Kubeconfig)
	c := keyedClient(t, key)
	var page string
	testfleet.Eventually(t, 10*time.Second, "the sync on the page", func() (bool, error) {
		resp, err := c.Get(url + "/view/syncs")
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		page = string(body)
		return resp.StatusCode == http.StatusOK && strings.Contains(page, "web-config"), err
	})
	for _, want := range []string{"branch main", "paris", "0123456789ab", "revision 2", "at wave canary, 1 of 3 clusters updated", "Sync now"} {
		if !strings.Contains(page, want) {
			t.Errorf("the syncs page does not show %q:\n%s", want, page)
		}
	}
	m := regexp.MustCompile(`name="token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no action token on the page:\n%s", page)
	}
	token := m[1]
	// Without the page's token, or from another site, the action is refused and nothing
	// is written.
	resp, err := c.PostForm(url+"/syncs/infrahubsyncs/site/sync", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("Sync now without the token: HTTP %d, want 403", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/syncs/infrahubsyncs/site/sync", strings.NewReader("token="+token))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example.com")
	if code := statusOf(c.Do(req)); code != http.StatusForbidden {
		t.Errorf("Sync now from another site: %d, want 403", code)
	}
	unrequested := &vidrav1alpha1.InfrahubSync{}
	if err := fleet.Hub.Client.Get(ctx, ctrlclient.ObjectKey{Name: "site"}, unrequested); err != nil {
		t.Fatal(err)
	}
	if v := unrequested.Annotations[vidrav1alpha1.RequestedAtAnnotation]; v != "" {
		t.Fatalf("a refused action requested a sync (%s)", v)
	}
	resp, err = c.PostForm(url+"/syncs/infrahubsyncs/site/sync", map[string][]string{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("Sync now: HTTP %d, want 204", resp.StatusCode)
	}
	got := &vidrav1alpha1.InfrahubSync{}
	if err := fleet.Hub.Client.Get(ctx, ctrlclient.ObjectKey{Name: "site"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[vidrav1alpha1.RequestedAtAnnotation] == "" {
		t.Error("Sync now did not request a sync")
	}
	if v, ok := got.Annotations[tracing.TraceparentAnnotation]; ok {
		t.Errorf("Sync now left an earlier request's trace context to be joined: %s", v)
	}
	if _, ok := got.Annotations[tracing.TracestateAnnotation]; ok {
		t.Error("Sync now left an earlier request's trace state")
	}
}

// statusOf is the status code of a response, whose body it closes; 0 on error.
func statusOf(resp *http.Response, err error) int {
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// The fleet page says, per cluster and for the hub itself, whether the caller may
// deliver there: a user bound to the verb deliver on one cluster's name sees yes there
// only; cluster-admin sees yes everywhere.
func TestTheFleetPageSaysWhereTheCallerMayDeliver(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"ui-deliver-a", "ui-deliver-b"} {
		// By hand, without a Secret: the cluster provider leaves it alone.
		vc := &vidrav1alpha1.VidraCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := fleet.Hub.Client.Create(ctx, vc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), vc) })
	}
	kubeconfig, err := fleet.Hub.AddUser("ui-deliverer")
	if err != nil {
		t.Fatal(err)
	}
	rbac := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: vidra-ui-deliverer}
rules:
- apiGroups: [infrahub.operators.com]
  resources: [vidraclusters, vidraresources]
  verbs: [get, list, watch]
- apiGroups: [infrahub.operators.com]
  resources: [vidraclusters]
  resourceNames: [ui-deliver-a]
  verbs: [deliver]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: vidra-ui-deliverer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vidra-ui-deliverer}
subjects: [{kind: User, name: ui-deliverer, apiGroup: rbac.authorization.k8s.io}]
`
	if _, err := fleet.Hub.Kubectl(ctx, []byte(rbac), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = fleet.Hub.Kubectl(context.Background(), []byte(rbac), "delete", "-f", "-") })

	for _, tc := range []struct {
		who        string
		kubeconfig []byte
		want       map[string]string // by cluster; "local" is the hub itself
	}{
		{"ui-deliverer", kubeconfig, map[string]string{"ui-deliver-a": "yes", "ui-deliver-b": "no", "local": "no"}},
		{"cluster-admin", fleet.Hub.Kubeconfig, map[string]string{"ui-deliver-a": "yes", "ui-deliver-b": "yes", "local": "yes"}},
	} {
		url, key := serve(t, tc.kubeconfig)
		c := keyedClient(t, key)
		var page string
		testfleet.Eventually(t, 10*time.Second, "both clusters on the page of "+tc.who, func() (bool, error) {
			page = body(t, c, url+"/view/")
			return strings.Contains(page, `data-cluster="ui-deliver-b"`), nil
		})
		for cluster, want := range tc.want {
			if got := deliverOf(page, cluster); got != want {
				t.Errorf("%s may deliver to %s: the page says %q, want %q\n%s", tc.who, cluster, got, want, page)
			}
		}
	}
}

// deliverOf reads the "may deliver" badge of a cluster's row on the fleet page (of the
// hub's line for local).
func deliverOf(page, cluster string) string {
	start := `data-cluster="` + cluster + `"`
	if cluster == "local" {
		start = "data-deliver-local"
	}
	i := strings.Index(page, start)
	if i < 0 {
		return ""
	}
	m := regexp.MustCompile(`data-deliver>([a-z]+)<`).FindStringSubmatch(page[i:])
	if m == nil {
		return ""
	}
	return m[1]
}
