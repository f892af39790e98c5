package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// keysBundle is an inline bundle carrying a Secret whose password is password.
func keysBundle(password string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: keys\nstringData:\n  password: %s\n", password)
}

// TestRevisionsHoldNoReadableSecrets: a VidraResource delivers a Secret inline; its
// revisions, including one an earlier version recorded with its manifest, name their
// content by digest only, so someone bound to Kubernetes' view role in the operator's
// namespace reads no password there; kubectl vidra history and rollback still work, with
// the operator holding exactly the chart's rights.
func TestRevisionsHoldNoReadableSecrets(t *testing.T) {
	const vrName, legacy, current = "keys", "legacy-hunter2", "current-hunter3"
	members := []string{"calm-a"}
	var op *fleetenv.Operator
	vr := func(password string) []byte {
		indented := "    " + strings.ReplaceAll(strings.TrimSuffix(keysBundle(password), "\n"), "\n", "\n    ")
		return fmt.Appendf(nil, "apiVersion: infrahub.operators.com/v1alpha1\nkind: VidraResource\nmetadata:\n  name: %s\nspec:\n"+
			"  destination: {cluster: %s, namespace: keys}\n  manifest: |\n%s\n", vrName, members[0], indented)
	}
	feature := features.New("revisions hold no readable secrets").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			installChart(ctx, t)
			// An earlier version delivered the legacy password, and kept its manifest in
			// its revision, before the upgrade.
			testfleet.Eventually(t, 30*time.Second, "the chart's policies in effect", func() (bool, error) {
				out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, vr(legacy), "create", "--dry-run=server", "-f", "-", "-o", "jsonpath={.metadata.finalizers}")
				return err == nil && strings.Contains(out, vidrav1alpha1.VidraResourceFinalizer), nil
			})
			kubectl(ctx, t, vr(legacy), "create", "-f", "-")
			recordAsEarlierVersion(ctx, t, vrName, keysBundle(legacy))
			op = startChartOperator(ctx, t, members)
			waitSecret(ctx, t, legacy)
			return ctx
		}).
		Assess("the view role reads no revision's manifest, the old one migrated", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			asViewer := viewerOfNamespace(ctx, t, "vera", chartNamespace)
			uid := kubectl(ctx, t, nil, "get", "vidraresource", vrName, "-o", "jsonpath={.metadata.uid}")
			testfleet.Eventually(t, 60*time.Second, "the earlier version's revision migrated", func() (bool, error) {
				return viewerReadsNoManifest(ctx, t, asViewer, uid, 1, legacy), nil
			})
			kubectl(ctx, t, vr(current), "apply", "-f", "-")
			waitSecret(ctx, t, current)
			testfleet.Eventually(t, 30*time.Second, "revision 2 recorded", func() (bool, error) {
				return viewerReadsNoManifest(ctx, t, asViewer, uid, 2, legacy, current), nil
			})
			if out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, asViewer, "-n", chartNamespace, "get", "secrets"); err == nil {
				t.Errorf("the view role reads the content store's Secrets:\n%s", out)
			}
			return ctx
		}).
		Assess("kubectl vidra history lists both; rollback delivers the migrated one", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			out, code := pluginExit(ctx, t, "history", "vr/"+vrName, "--operator-namespace", chartNamespace)
			t.Logf("kubectl vidra history vr/%s:\n%s", vrName, out)
			if code != 0 || !strings.Contains(out, "\n1 ") || !strings.Contains(out, "\n2 ") {
				t.Errorf("kubectl vidra history (exit %d) does not list revisions 1 and 2", code)
			}
			out, code = pluginExit(ctx, t, "rollback", "vr/"+vrName, "--to-revision", "1", "--operator-namespace", chartNamespace)
			if code != 0 {
				t.Fatalf("kubectl vidra rollback (exit %d):\n%s", code, out)
			}
			waitSecret(ctx, t, legacy)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if t.Failed() && op != nil {
				t.Logf("operator logs:\n%s", op.Logs())
			}
			kubectl(ctx, t, nil, "delete", "vidraresource", vrName, "--ignore-not-found", "--timeout=60s")
			kubectl(ctx, t, nil, "delete", "rolebinding", "-n", chartNamespace, "vera-view", "--ignore-not-found")
			stopChartOperator(ctx, t, op, members)
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}

// recordAsEarlierVersion records manifest as the VidraResource's revision 1 the way
// versions before the content store kept revisions did: the manifest in the revision.
func recordAsEarlierVersion(ctx context.Context, t *testing.T, name, manifest string) {
	t.Helper()
	hub := fleetenv.Fleet(ctx).Hub.Client
	vr := &vidrav1alpha1.VidraResource{}
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, vr); err != nil {
		t.Fatal(err)
	}
	earlier := &history.History{Client: hub, Reader: hub, Namespace: chartNamespace}
	if _, err := earlier.Record(ctx, vr, history.Entry{
		Body: history.Body{Manifest: manifest}, Digest: content.Digest([]byte(manifest)), Source: "user", Limit: 10,
		Inventory: []vidrav1alpha1.ManagedResource{{APIVersion: "v1", Kind: "Secret", Namespace: "keys", Name: "db"}},
	}); err != nil {
		t.Fatal(err)
	}
	var crs appsv1.ControllerRevisionList
	if err := hub.List(ctx, &crs, client.InNamespace(chartNamespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(vr.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(crs.Items) != 1 || !strings.Contains(string(crs.Items[0].Data.Raw), `"manifest"`) {
		t.Fatalf("the earlier version's revision: %+v", crs.Items)
	}
}

// viewerOfNamespace binds Kubernetes' view role to user in namespace, and returns the
// kubectl flag that acts as that user. The view role is an aggregate, which this fleet's
// hub fills only while kube-controller-manager runs its aggregation controller.
func viewerOfNamespace(ctx context.Context, t *testing.T, user, namespace string) string {
	t.Helper()
	kcm, err := fleetenv.StartControllerManager(fleetenv.Fleet(ctx).Hub, t.TempDir(), "clusterrole-aggregation-controller")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kcm.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	})
	kubectl(ctx, t, nil, "create", "rolebinding", "-n", namespace, user+"-view", "--clusterrole=view", "--user="+user)
	kubeconfig, err := fleetenv.Fleet(ctx).Hub.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	return "--kubeconfig=" + writeFile(t, user+".kubeconfig", kubeconfig)
}

// viewerReadsNoManifest says whether the viewer reads want revisions of the VidraResource
// of uid, all of them naming their content by digest; it fails the test when one holds a
// password.
func viewerReadsNoManifest(ctx context.Context, t *testing.T, asViewer, uid string, want int, passwords ...string) bool {
	t.Helper()
	out, err := fleetenv.Fleet(ctx).Hub.Kubectl(ctx, nil, asViewer, "-n", chartNamespace, "get", "controllerrevisions",
		"-l", vidrav1alpha1.RevisionOfLabel+"="+uid, "-o", `jsonpath={range .items[*]}{.metadata.labels.vidra\.infrahub\.operators\.com/revision-stored}|{.data}{"\n"}{end}`)
	if err != nil {
		return false // until the view role is aggregated
	}
	for _, p := range passwords {
		if strings.Contains(out, p) {
			t.Fatalf("a revision says %s:\n%s", p, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, line := range lines {
		if !strings.HasPrefix(line, "true|") || strings.Contains(line, `"manifest"`) {
			t.Logf("not yet: a revision holds its manifest:\n%s", out)
			return false
		}
	}
	return len(lines) == want
}

// waitSecret waits until the member's Secret keys/db holds password.
func waitSecret(ctx context.Context, t *testing.T, password string) {
	t.Helper()
	testfleet.Eventually(t, 60*time.Second, "the member's Secret says "+password, func() (bool, error) {
		out, err := fleetenv.Fleet(ctx).Members[0].Kubectl(ctx, nil, "-n", "keys", "get", "secret", "db", "-o", "jsonpath={.data.password}")
		if err != nil {
			return false, nil
		}
		got, err := base64.StdEncoding.DecodeString(out)
		return err == nil && string(got) == password, nil
	})
}
