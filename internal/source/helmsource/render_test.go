package helmsource_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/source/helmsource"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

var baseAPIs = []string{"v1", "v1/ConfigMap", "apps/v1", "apps/v1/Deployment", "batch/v1", "batch/v1/Job"}

func opts(apis ...string) helmsource.RenderOptions {
	return helmsource.RenderOptions{
		ReleaseName: "web", Namespace: "apps",
		Capabilities: helmsource.Capabilities{KubeVersion: "v1.36.0", APIVersions: append(slices.Clone(baseAPIs), apis...)},
		IncludeCRDs:  true,
	}
}

func render(t *testing.T, ch *chart.Chart, o helmsource.RenderOptions) helmsource.Rendered {
	t.Helper()
	r, err := helmsource.Render(ch, o)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return r
}

// object is one document of a rendering, as a user would read it with kubectl.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

func objects(t *testing.T, manifest []byte) []object {
	t.Helper()
	var out []object
	for _, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(manifest), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("document does not parse: %v\n%s", err, doc)
		}
		out = append(out, o)
	}
	return out
}

func names(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Kind+"/"+o.Metadata.Name)
	}
	return out
}

func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	t.Fatalf("no %s/%s in %v", kind, name, names(objs))
	return object{}
}

func TestTemplatesSeeExactlyTheClustersCapabilities(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0")
	without := objects(t, render(t, ch, opts()).Manifest)
	if cm := find(t, without, "ConfigMap", "web-caps"); cm.Data["hasWidgets"] != "false" || cm.Data["kubeVersion"] != "v1.36.0" {
		t.Fatalf("without the API: %v", cm.Data)
	}
	if len(without) != 1 {
		t.Fatalf("without the API: %v, want only the ConfigMap", names(without))
	}
	with := objects(t, render(t, ch, opts("example.vidra.dev/v1", "example.vidra.dev/v1/Widget")).Manifest)
	if cm := find(t, with, "ConfigMap", "web-caps"); cm.Data["hasWidgets"] != "true" {
		t.Fatalf("with the API: %v", cm.Data)
	}
	find(t, with, "Widget", "web-caps")
}

func TestValuesReachTemplatesAndViolationsOfTheSchemaAreErrors(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0")
	o := opts()
	o.Values = map[string]any{"greeting": "hi", "cluster": "eu-1", "replicas": 2}
	cm := find(t, objects(t, render(t, ch, o).Manifest), "ConfigMap", "web-caps")
	if cm.Data["greeting"] != "hi" || cm.Data["cluster"] != "eu-1" {
		t.Fatalf("values not used: %v", cm.Data)
	}
	o.Values = map[string]any{"greeting": 42, "replicas": -1}
	_, err := helmsource.Render(ch, o)
	if err == nil {
		t.Fatal("Render accepted values that violate values.schema.json")
	}
	for _, s := range []string{"schema", "greeting", "replicas"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

func TestIsUpgradeAndRevisionAreVisibleToTemplates(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0")
	o := opts()
	cm := find(t, objects(t, render(t, ch, o).Manifest), "ConfigMap", "web-caps")
	if cm.Data["isUpgrade"] != "false" || cm.Data["revision"] != "1" {
		t.Fatalf("install: %v", cm.Data)
	}
	o.IsUpgrade, o.Revision = true, 4
	cm = find(t, objects(t, render(t, ch, o).Manifest), "ConfigMap", "web-caps")
	if cm.Data["isUpgrade"] != "true" || cm.Data["revision"] != "4" {
		t.Fatalf("upgrade: %v", cm.Data)
	}
}

func TestHooksArePhasedRenamedOrDropped(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.HooksChart, "1.0.0")
	r := render(t, ch, opts())
	objs := objects(t, r.Manifest)

	jobName := regexp.MustCompile(`^web-migrate-[0-9a-f]{10}$`)
	got := names(objs)
	if len(got) != 5 || got[0] != "ConfigMap/web-pre" || !jobName.MatchString(objs[1].Metadata.Name) ||
		got[2] != "ConfigMap/web-config" || got[3] != "Deployment/web" || got[4] != "ConfigMap/web-post" {
		t.Fatalf("objects %v: want pre hooks by weight, the templates, then the post hook", got)
	}
	for i, phase := range []string{"pre", "pre", "", "", "post"} {
		if a := objs[i].Metadata.Annotations[vidrav1alpha1.ApplyPhaseAnnotation]; a != phase {
			t.Errorf("%s: phase %q, want %q", got[i], a, phase)
		}
	}
	if objs[1].Metadata.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" {
		t.Errorf("the Job lost its helm.sh/hook annotation: %v", objs[1].Metadata.Annotations)
	}
	want := []string{"ConfigMap/web-cleanup (pre-delete)", "Pod/web-test (test)"}
	if !slices.Equal(r.Dropped, want) {
		t.Errorf("dropped %v, want %v", r.Dropped, want)
	}
	if bytes.Contains(r.Manifest, []byte("Installed web")) {
		t.Error("NOTES.txt is in the manifest")
	}
	if !bytes.Contains(r.Manifest, []byte("# Source: hooks-chart/templates/deployment.yaml\n")) {
		t.Error("no # Source comments")
	}

	// A Job hook is a new Job when its rendering changes, and the same one when not.
	again := objects(t, render(t, ch, opts()).Manifest)
	o := opts()
	o.Values = map[string]any{"image": "busybox:1.37"}
	changed := objects(t, render(t, ch, o).Manifest)
	if again[1].Metadata.Name != objs[1].Metadata.Name || changed[1].Metadata.Name == objs[1].Metadata.Name {
		t.Fatalf("Job names %s, %s, %s: want equal for equal inputs, new for a new image",
			objs[1].Metadata.Name, again[1].Metadata.Name, changed[1].Metadata.Name)
	}
}

func TestALongHookNameStaysALabel(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.HooksChart, "1.0.0")
	o := opts()
	o.ReleaseName = strings.Repeat("a", 50) + "-b"
	for _, obj := range objects(t, render(t, ch, o).Manifest) {
		if obj.Kind == "Job" && (len(obj.Metadata.Name) > 63 || strings.Contains(obj.Metadata.Name, "--")) {
			t.Fatalf("Job name %q", obj.Metadata.Name)
		}
	}
}

func TestTheJobHashIsOfTheRenderedDocument(t *testing.T) {
	ch := helmrepo.ChartWith(t, helmrepo.HooksChart, "1.0.0", map[string]string{
		"templates/migrate-job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: m\n  annotations:\n    helm.sh/hook: post-install\n",
	})
	objs := objects(t, render(t, ch, opts()).Manifest)
	sum := sha256.Sum256([]byte("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: m\n  annotations:\n    helm.sh/hook: post-install\n"))
	job := find(t, objs, "Job", "m-"+hex.EncodeToString(sum[:])[:10])
	if job.Metadata.Annotations[vidrav1alpha1.ApplyPhaseAnnotation] != vidrav1alpha1.ApplyPhasePost {
		t.Fatalf("annotations %v", job.Metadata.Annotations)
	}
}

func TestCRDsComeFirstAndOnlyWhenAskedFor(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.CRDsChart, "1.0.0")
	got := names(objects(t, render(t, ch, opts()).Manifest))
	want := []string{"CustomResourceDefinition/widgets.example.vidra.dev", "ConfigMap/web-config", "Widget/web"}
	if !slices.Equal(got, want) {
		t.Fatalf("with CRDs: %v, want %v", got, want)
	}
	o := opts()
	o.IncludeCRDs = false
	got = names(objects(t, render(t, ch, o).Manifest))
	if !slices.Equal(got, want[1:]) {
		t.Fatalf("without CRDs: %v, want %v", got, want[1:])
	}
}

// A chart's CRDs, and what it marks helm.sh/resource-policy: keep, are never deleted by
// Vidra, as Helm never deletes them: they are marked prune: disabled; the rest is not.
func TestCRDsAndKeptObjectsAreNeverPruned(t *testing.T) {
	ch := helmrepo.ChartWith(t, helmrepo.CRDsChart, "1.0.0", map[string]string{
		"templates/pvc.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  annotations:\n    helm.sh/resource-policy: keep\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n",
	})
	objs := objects(t, render(t, ch, opts()).Manifest)
	for _, o := range []struct {
		kind, name string
		kept       bool
	}{
		{"CustomResourceDefinition", "widgets.example.vidra.dev", true},
		{"PersistentVolumeClaim", "data", true},
		{"ConfigMap", "web-config", false},
	} {
		got := find(t, objs, o.kind, o.name).Metadata.Annotations[vidrav1alpha1.PruneAnnotation] == vidrav1alpha1.PruneDisabled
		if got != o.kept {
			t.Errorf("%s %s marked prune: disabled %v, want %v", o.kind, o.name, got, o.kept)
		}
	}
}

func TestAChartForAnotherKubernetesIsRefused(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0")
	ch.Metadata.KubeVersion = ">=1.40.0-0"
	_, err := helmsource.Render(ch, opts())
	if err == nil || !strings.Contains(err.Error(), ">=1.40.0-0") || !strings.Contains(err.Error(), "v1.36.0") {
		t.Fatalf("Render = %v, want an error naming the range and the cluster's version", err)
	}
}

func TestRenderingIsDeterministicAndLeavesTheChartAlone(t *testing.T) {
	ch := helmrepo.Chart(t, helmrepo.HooksChart, "1.0.0")
	before := helmrepo.Package(t, ch)
	first := render(t, ch, opts())
	for range 5 {
		if !bytes.Equal(render(t, ch, opts()).Manifest, first.Manifest) {
			t.Fatal("two renderings of equal inputs differ")
		}
	}
	if !bytes.Equal(helmrepo.Package(t, ch), before) {
		t.Fatal("Render changed the chart")
	}
}

func TestSchemasThatReferOutsideThemselvesAreRefused(t *testing.T) {
	for _, schema := range []string{
		`{"properties": {"greeting": {"$ref": "file:///etc/passwd"}}}`,
		`{"properties": {"greeting": {"$ref": "http://169.254.169.254/latest"}}}`,
		`{"$schema": "https://schemas.example/evil", "type": "object"}`,
	} {
		ch := helmrepo.ChartWith(t, helmrepo.CapsChart, "1.0.0", map[string]string{"values.schema.json": schema})
		_, err := helmsource.Render(ch, opts())
		if err == nil || !strings.Contains(err.Error(), "values.schema.json") {
			t.Errorf("schema %s: Render = %v, want a refusal", schema, err)
		}
	}
}
