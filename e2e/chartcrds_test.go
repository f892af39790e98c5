package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// crdsDirectoryCommit is the last commit whose chart kept its CRDs in crds/, which Helm
// installs once and never upgrades: the chart a hub installed before its CRDs moved
// among the templates.
const crdsDirectoryCommit = "50c27ee"

// gitSyncCRD is the CRD the test follows; the chart renders all seven alike.
const gitSyncCRD = "gitsyncs.infrahub.operators.com"

// The CRDs upgrade with the chart. A release installed from a chart that kept them in
// crds/ takes them over with one `helm upgrade --take-ownership`; from then on every
// `helm upgrade` updates them, and `helm uninstall` leaves them, and so every sync.
func TestTheChartUpgradesItsCRDs(t *testing.T) {
	const release, namespace = "vidra-crds", "vidra-crds"
	var kubeconfig string
	member := func(ctx context.Context) *testfleet.Cluster { return fleetenv.Fleet(ctx).Members[1] }
	helmOn := func(ctx context.Context, t *testing.T, args ...string) string {
		return helmRun(ctx, t, append(args, "--kubeconfig", kubeconfig, "--namespace", namespace)...)
	}
	f := features.New("CRDs with the chart").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			var err error
			if kubeconfig, err = member(ctx).WriteKubeconfig(t.TempDir()); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the earlier chart installs them from crds/, unmanaged", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			helmOn(ctx, t, "install", release, chartAt(ctx, t, crdsDirectoryCommit), "--create-namespace", "--set", "mode=standalone", "--wait=false")
			if crd := getCRD(ctx, t, member(ctx).Client); crd.Labels["app.kubernetes.io/managed-by"] == "Helm" {
				t.Fatalf("Helm manages %s from crds/; the test follows a release whose CRDs it does not", gitSyncCRD)
			}
			return ctx
		}).
		Assess("the first upgrade takes them over and updates them", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// --reuse-values keeps the earlier release's values, which name no crds.
			helmOn(ctx, t, "upgrade", release, chartWithCRDRevision(t, "2"), "--take-ownership", "--reuse-values", "--wait=false")
			crd := getCRD(ctx, t, member(ctx).Client)
			if crd.Labels["app.kubernetes.io/managed-by"] != "Helm" || crd.Annotations["helm.sh/resource-policy"] != "keep" || crd.Annotations["vidra.test/revision"] != "2" {
				t.Errorf("after the upgrade %s has labels %v, annotations %v", gitSyncCRD, crd.Labels, crd.Annotations)
			}
			return ctx
		}).
		Assess("every later upgrade updates them", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			helmOn(ctx, t, "upgrade", release, chartWithCRDRevision(t, "3"), "--set", "mode=standalone", "--wait=false")
			if got := getCRD(ctx, t, member(ctx).Client).Annotations["vidra.test/revision"]; got != "3" {
				t.Errorf("after a second upgrade %s is at revision %q, want 3", gitSyncCRD, got)
			}
			return ctx
		}).
		Assess("helm uninstall leaves them", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			helmOn(ctx, t, "uninstall", release, "--wait")
			getCRD(ctx, t, member(ctx).Client)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			deleteVidraCRDs(ctx, t, member(ctx))
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// deleteVidraCRDs leaves the member as it was: a cluster without Vidra's CRDs.
func deleteVidraCRDs(ctx context.Context, t *testing.T, member *testfleet.Cluster) {
	t.Helper()
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := member.Client.List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		if crd.Spec.Group != "infrahub.operators.com" {
			continue
		}
		if out, err := member.Kubectl(ctx, nil, "delete", "crd", crd.Name, "--wait"); err != nil {
			t.Errorf("deleting %s: %v: %s", crd.Name, err, out)
		}
	}
}

func getCRD(ctx context.Context, t *testing.T, c client.Client) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: gitSyncCRD}, crd); err != nil {
		t.Fatalf("the CRD %s: %v", gitSyncCRD, err)
	}
	return crd
}

// chartAt writes the chart of an earlier commit to a directory and returns it.
func chartAt(ctx context.Context, t *testing.T, commit string) string {
	t.Helper()
	return treeAt(ctx, t, chartDir(t), commit)
}

// treeAt extracts what dir holds at an earlier commit into a new directory and returns
// it. Run in a subdirectory, git archive holds that subdirectory alone.
func treeAt(ctx context.Context, t *testing.T, dir, commit string) string {
	t.Helper()
	tree := t.TempDir()
	archive := filepath.Join(t.TempDir(), "tree.tar")
	for _, cmd := range []*exec.Cmd{
		exec.CommandContext(ctx, "git", "-C", dir, "archive", "--output", archive, commit, "--", "."),
		exec.CommandContext(ctx, "tar", "-x", "-f", archive, "-C", tree),
	} {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	return tree
}

// chartWithCRDRevision copies this chart with an annotation on the GitSync CRD, so that
// an upgrade to it changes the CRD.
func chartWithCRDRevision(t *testing.T, revision string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vidra")
	if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "templates", "crds", "infrahub.operators.com_gitsyncs.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	annotated := strings.Replace(string(data), "  annotations:\n", "  annotations:\n    vidra.test/revision: \""+revision+"\"\n", 1)
	if err := os.WriteFile(path, []byte(annotated), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
