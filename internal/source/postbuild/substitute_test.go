package postbuild_test

import (
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/postbuild"
)

const bundle = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: ${namespace:=apps}
data:
  region: "${region}"
  cluster: ${cluster.name}
  ring: ${cluster.labels.vidra.example/ring:=blue}
  literal: $${region}
  price: $$5
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: script
  namespace: apps
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  run.sh: echo ${HOME}
`

func TestABundleIsSubstitutedForEachCluster(t *testing.T) {
	tpl, err := postbuild.Parse([]byte(bundle))
	if err != nil {
		t.Fatal(err)
	}
	refs := tpl.Refs()
	if !refs.Name || strings.Join(refs.Labels, ",") != "vidra.example/ring" {
		t.Fatalf("refs = %+v", refs)
	}
	out, err := tpl.Substitute(map[string]string{"region": "3"}, postbuild.Cluster{Name: "member-1", Labels: map[string]string{"vidra.example/ring": "green"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"namespace: apps\n", `region: "3"`, "cluster: member-1\n", "ring: green\n", "literal: ${region}\n", "price: $5\n", "run.sh: echo ${HOME}\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	out, err = tpl.Substitute(map[string]string{"region": "eu", "namespace": "web"}, postbuild.Cluster{Name: "member-2"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "ring: blue\n") || !strings.Contains(string(out), "namespace: web\n") {
		t.Errorf("defaults or variables not used:\n%s", out)
	}
}

func TestClustersThatDifferInWhatTheBundleDoesNotNameShareAKey(t *testing.T) {
	tpl, err := postbuild.Parse([]byte("kind: ConfigMap\nmetadata:\n  name: a\ndata:\n  env: ${cluster.labels.env}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := tpl.Refs().Key(postbuild.Cluster{Name: "one", Labels: map[string]string{"env": "prod", "zone": "a"}})
	b := tpl.Refs().Key(postbuild.Cluster{Name: "two", Labels: map[string]string{"env": "prod", "zone": "b"}})
	c := tpl.Refs().Key(postbuild.Cluster{Name: "three", Labels: map[string]string{"env": "dev"}})
	d := tpl.Refs().Key(postbuild.Cluster{Name: "four"})
	if a != b || a == c || c == d || a == d {
		t.Errorf("keys: %q %q %q %q", a, b, c, d)
	}
}

func TestWhatCannotBeSubstitutedIsNamed(t *testing.T) {
	tpl, err := postbuild.Parse([]byte("kind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\ndata:\n  r: ${region}\n  z: ${cluster.labels.zone}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Substitute(nil, postbuild.Cluster{Name: "member-2", Labels: map[string]string{"zone": "a"}})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap ns/a: ${region} is not set") {
		t.Errorf("missing variable: %v", err)
	}
	_, err = tpl.Substitute(map[string]string{"region": "eu"}, postbuild.Cluster{Name: "member-2"})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap ns/a: ${cluster.labels.zone}: cluster member-2 has no such label") {
		t.Errorf("missing label: %v", err)
	}
	for doc, want := range map[string]string{
		"kind: Secret\nmetadata:\n  name: s\nstringData:\n  a: ${cluster.region}\n": "Secret s: ${cluster.region} is not known",
		"kind: Secret\nmetadata:\n  name: s\nstringData:\n  a: ${oops\n":            "Secret s: missing closing brace",
	} {
		if _, err := postbuild.Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", doc, err, want)
		}
	}
}

func TestVariableNamesAreFlux(t *testing.T) {
	for name, want := range map[string]bool{"region": true, "_x1": true, "CLUSTER_ENV": true, "1st": false, "a-b": false, "a.b": false, "": false, "__vidra_cluster_name": false} {
		if got := postbuild.ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %t", name, got)
		}
	}
}
