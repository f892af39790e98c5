package bundle

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`

func overlayTree(t *testing.T) string {
	t.Helper()
	return writeTree(t, map[string]string{
		"base/kustomization.yaml": "resources:\n- deployment.yaml\n- config.yaml\n",
		"base/deployment.yaml":    deployment,
		"base/config.yaml":        cm("settings"),
		"overlays/prod/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: prod-
resources:
- ../../base
patches:
- path: replicas.yaml
`,
		"overlays/prod/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n",
	})
}

func TestKustomizeOverlayWithLocalBase(t *testing.T) {
	root := overlayTree(t)
	out, err := Build(root, "./overlays/prod", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, out); strings.Join(got, ",") != "prod-web,prod-settings" {
		t.Errorf("objects %v, want [prod-web prod-settings]\n%s", got, out)
	}
	if !strings.Contains(string(out), "replicas: 3") || !strings.Contains(string(out), "image: nginx:1.27") {
		t.Errorf("the patch was not applied onto the base:\n%s", out)
	}
}

func TestKustomizeLimitsCountItsReads(t *testing.T) {
	root := overlayTree(t)
	// Two kustomizations, a patch and two resources: five files.
	_, err := Build(root, "overlays/prod", Limits{MaxFiles: 4})
	var le *LimitError
	if !errors.As(err, &le) || le.Bound != "files" {
		t.Fatalf("Build with MaxFiles 4 = %v, want a *LimitError on files", err)
	}
	if _, err := Build(root, "overlays/prod", Limits{MaxFiles: 5}); err != nil {
		t.Errorf("Build with MaxFiles 5: %v", err)
	}
	_, err = Build(root, "overlays/prod", Limits{MaxBytes: 200})
	if !errors.As(err, &le) || le.Bound != "bytes" {
		t.Errorf("Build with MaxBytes 200 = %v, want a *LimitError on bytes", err)
	}
}

// noExec puts fake git, helm and kustomize binaries first on PATH that
// record being run, and an HTTP server that records being asked.
func noExec(t *testing.T) (url string, ran func() bool) {
	t.Helper()
	bin := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	for _, name := range []string{"git", "helm", "kustomize"} {
		script := "#!/bin/sh\ntouch " + marker + "\nexit 1\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(cm("fetched")))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() bool {
		_, err := os.Stat(marker)
		return err == nil || hits.Load() > 0
	}
}

func TestRemoteBasesAreRefusedBeforeBuilding(t *testing.T) {
	url, ran := noExec(t)
	spellings := []string{
		"https://github.com/x/y//z?ref=v1",
		"github.com/x/y//z?ref=v1",
		"git@github.com:x/y.git//z",
		"ssh://git@example.com/x/y.git",
		"git::https://example.com/x/y",
		"file:///tmp/repo.git",
		url + "/remote.yaml",
	}
	for _, remote := range spellings {
		for _, field := range []string{"resources", "bases", "components"} {
			root := writeTree(t, map[string]string{
				"deploy/prod/kustomization.yaml": field + ":\n- " + remote + "\n",
			})
			_, err := Build(root, "deploy/prod", Limits{})
			var rb *RemoteBaseError
			if !errors.As(err, &rb) {
				t.Fatalf("%s %q: Build = %v, want a *RemoteBaseError", field, remote, err)
			}
			want := `kustomization deploy/prod/kustomization.yaml refers to the remote base "` + remote +
				`": Vidra builds only what the sync's source holds; vendor it into the repository`
			if err.Error() != want {
				t.Errorf("error %q\nwant  %q", err, want)
			}
		}
	}
	if ran() {
		t.Error("a remote base was fetched or a binary was run")
	}
}

func TestRemoteReferencesAnywhereAreRefused(t *testing.T) {
	url, ran := noExec(t)
	cases := map[string]map[string]string{
		"through a local base": {
			"app/kustomization.yaml":  "resources:\n- ../base\n",
			"base/kustomization.yaml": "resources:\n- github.com/x/y//z?ref=v1\n",
		},
		"a remote patch file": {
			"app/kustomization.yaml": "resources:\n- cm.yaml\npatches:\n- path: " + url + "/patch.yaml\n",
			"app/cm.yaml":            cm("a"),
		},
		"a remote generator file": {
			"app/kustomization.yaml": "configMapGenerator:\n- name: c\n  files:\n  - key=" + url + "/f.txt\n",
		},
		"helm charts": {
			"app/kustomization.yaml": "helmCharts:\n- name: redis\n  repo: " + url + "\n  version: 1.0.0\n",
		},
	}
	for name, files := range cases {
		root := writeTree(t, files)
		_, err := Build(root, "app", Limits{})
		var rb *RemoteBaseError
		if !errors.As(err, &rb) {
			t.Errorf("%s: Build = %v, want a *RemoteBaseError", name, err)
		}
	}
	if ran() {
		t.Error("something was fetched or run")
	}
}

func TestKustomizeCannotLeaveTheSource(t *testing.T) {
	outside := writeTree(t, map[string]string{"kustomization.yaml": "resources:\n- cm.yaml\n", "cm.yaml": cm("secret")})
	root := writeTree(t, map[string]string{
		"app/kustomization.yaml":  "resources:\n- ../../" + filepath.Base(outside) + "\n",
		"link/kustomization.yaml": "resources:\n- escape\n",
	})
	mustSymlink(t, outside, filepath.Join(root, "link", "escape"))
	for _, p := range []string{"app", "link"} {
		_, err := Build(root, p, Limits{})
		var pe *PathError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "outside the source") {
			t.Errorf("Build(%q) = %v, want a *PathError", p, err)
		}
	}
}

func TestConfinedFSRefusesWhatTheChecksMiss(t *testing.T) {
	outside := writeTree(t, map[string]string{"secret.yaml": cm("secret")})
	root := writeTree(t, map[string]string{"a.yaml": cm("a")})
	fsys := &confinedFS{root: root, budget: &budget{}}
	if _, err := fsys.ReadFile(filepath.Join(outside, "secret.yaml")); err == nil {
		t.Error("ReadFile outside the root succeeded")
	}
	if fsys.Exists(filepath.Join(outside, "secret.yaml")) || fsys.IsDir(outside) {
		t.Error("paths outside the root are visible")
	}
	if err := fsys.WriteFile(filepath.Join(root, "b.yaml"), nil); err == nil {
		t.Error("WriteFile succeeded")
	}
}

func TestKustomizeErrorsNameTheKustomization(t *testing.T) {
	root := writeTree(t, map[string]string{"app/kustomization.yaml": "resources:\n- missing.yaml\n"})
	_, err := Build(root, "app", Limits{})
	var ke *KustomizeError
	if !errors.As(err, &ke) || ke.Kustomization != "app/kustomization.yaml" {
		t.Fatalf("Build = %v, want a *KustomizeError for app/kustomization.yaml", err)
	}

	empty := writeTree(t, map[string]string{"app/kustomization.yaml": "namePrefix: x-\n"})
	_, err = Build(empty, "app", Limits{})
	var ee *EmptyError
	if !errors.As(err, &ee) {
		t.Errorf("an empty kustomization = %v, want an *EmptyError", err)
	}
}

// A generator or transformer configured in a file of its own loads the files it names:
// a URL there is refused as in the kustomization, before anything is fetched.
func TestRemoteFilesInGeneratorAndTransformerConfigsAreRefused(t *testing.T) {
	url, ran := noExec(t)
	cases := map[string]map[string]string{
		"a ConfigMapGenerator's file": {
			"app/kustomization.yaml": "generators:\n- gen.yaml\n",
			"app/gen.yaml":           "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: c\nfiles:\n- key=" + url + "/metadata\n",
		},
		"a ConfigMapGenerator's env file": {
			"app/kustomization.yaml": "generators:\n- gen.yaml\n",
			"app/gen.yaml":           "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: c\nenvs:\n- " + url + "/env\n",
		},
		"a PatchTransformer's path": {
			"app/kustomization.yaml": "resources:\n- cm.yaml\ntransformers:\n- patch.yaml\n",
			"app/cm.yaml":            cm("a"),
			"app/patch.yaml":         "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\npath: " + url + "/patch.yaml\ntarget:\n  kind: ConfigMap\n",
		},
		"a Helm chart generator": {
			"app/kustomization.yaml": "generators:\n- helm.yaml\n",
			"app/helm.yaml":          "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata:\n  name: h\nname: redis\nrepo: " + url + "\n",
		},
	}
	for name, files := range cases {
		root := writeTree(t, files)
		_, err := Build(root, "app", Limits{})
		var rb *RemoteBaseError
		if !errors.As(err, &rb) {
			t.Errorf("%s: Build = %v, want a *RemoteBaseError", name, err)
		}
	}
	if ran() {
		t.Error("something was fetched or run")
	}
	// A generator's local files still build.
	root := writeTree(t, map[string]string{
		"app/kustomization.yaml": "generators:\n- gen.yaml\n",
		"app/gen.yaml":           "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: c\nfiles:\n- key=value.txt\n",
		"app/value.txt":          "local",
	})
	out, err := Build(root, "app", Limits{})
	if err != nil || !strings.Contains(string(out), "local") {
		t.Errorf("a generator of local files: Build = %q, %v", out, err)
	}
}

// A kustomization file that is a symlink leading outside the source is not read.
func TestAKustomizationSymlinkedFromOutsideIsNotRead(t *testing.T) {
	outside := writeTree(t, map[string]string{"credentials": "password: hunter2\n"})
	root := writeTree(t, map[string]string{"app/cm.yaml": cm("a")})
	mustSymlink(t, filepath.Join(outside, "credentials"), filepath.Join(root, "app", "kustomization.yaml"))
	_, err := Build(root, "app", Limits{})
	var pe *PathError
	if !errors.As(err, &pe) || strings.Contains(err.Error(), "password") {
		t.Errorf("Build = %v, want a *PathError that shows nothing of the file", err)
	}
}
