package manifest

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeAcceptsTheFormsUsersWrite(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		want     []string // kind/name of each object, in order
	}{
		{"the original Vidra's JSON string", `{"apiVersion": "v1","kind": "Namespace","metadata":{"name": "ns-sample"}}`,
			[]string{"Namespace/ns-sample"}},
		{"multi-document YAML with empty documents and comments", `
# a namespace first
---
apiVersion: v1
kind: Namespace
metadata:
  name: web
---
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: web
spec:
  replicas: 3
...
`, []string{"Namespace/web", "Deployment/web"}},
		{"a JSON stream", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`, []string{"ConfigMap/a", "ConfigMap/b"}},
		{"a List is expanded in place", `
apiVersion: v1
kind: ConfigMap
metadata: {name: before}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: one}}
- {apiVersion: v1, kind: Secret, metadata: {name: two}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: after}
`, []string{"ConfigMap/before", "ConfigMap/one", "Secret/two", "ConfigMap/after"}},
		{"a typed list kind", `{"apiVersion":"v1","kind":"ConfigMapList","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}]}`,
			[]string{"ConfigMap/x"}},
		{"same name in two namespaces, or two kinds", `
apiVersion: v1
kind: ConfigMap
metadata: {name: x, namespace: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: x, namespace: b}
---
apiVersion: v1
kind: Secret
metadata: {name: x, namespace: a}
`, []string{"ConfigMap/x", "ConfigMap/x", "Secret/x"}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects, err := Decode([]byte(tt.manifest))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objects {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("objects = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecodeKeepsIntegersIntegers(t *testing.T) {
	for _, manifest := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n",
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3}}`,
	} {
		objects, err := Decode([]byte(manifest))
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := objects[0].Object["spec"].(map[string]any)["replicas"].(int64); !ok || v != 3 {
			t.Errorf("replicas = %#v, want int64 3", objects[0].Object["spec"].(map[string]any)["replicas"])
		}
		objects[0].DeepCopy() // panics on values unstructured objects cannot hold
	}
}

func TestDecodeNamesTheBrokenDocument(t *testing.T) {
	good := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n"
	tests := []struct {
		name      string
		manifest  string
		index     int
		item      int
		inMessage string
	}{
		{"YAML syntax", good + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: [ConfigMap\n", 2, -1, "not valid YAML or JSON"},
		{"not an object", good + "---\n- a\n- b\n", 1, -1, "not an object"},
		{"no kind", good + "---\napiVersion: v1\nmetadata: {name: x}\n", 1, -1, "kind is missing"},
		{"no apiVersion", "kind: ConfigMap\nmetadata: {name: x}\n", 0, -1, "apiVersion is missing"},
		{"bad apiVersion", "apiVersion: a/b/c\nkind: ConfigMap\nmetadata: {name: x}\n", 0, -1, "apiVersion"},
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: x-}\n", 0, -1, "metadata.name is missing"},
		{"no metadata", "apiVersion: v1\nkind: ConfigMap\n", 0, -1, "metadata is missing"},
		{"name with a slash", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a/b}\n", 0, -1, "metadata.name"},
		{"invalid namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: Not_OK}\n", 0, -1, "metadata.namespace"},
		{"label not a string", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {a: 1}}\n", 0, -1, "metadata.labels[a]"},
		{"declared twice", good + "---\n" + good, 1, -1, "declared twice (first in document[0])"},
		{"bad List item", "apiVersion: v1\nkind: List\nitems:\n- " + "{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap}\n", 0, 1, "metadata is missing"},
		{"List item not an object", "apiVersion: v1\nkind: List\nitems: [1]\n", 0, 0, "must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.manifest))
			var docErr *DocumentError
			if !errors.As(err, &docErr) {
				t.Fatalf("Decode = %v, want a DocumentError", err)
			}
			if docErr.Index != tt.index || docErr.Item != tt.item || !strings.Contains(err.Error(), tt.inMessage) {
				t.Errorf("error %q (index %d, item %d), want index %d item %d containing %q", err, docErr.Index, docErr.Item, tt.index, tt.item, tt.inMessage)
			}
		})
	}
}

// FuzzDecode: no input makes Decode panic, and whatever it accepts is a valid, copyable
// unstructured object with a kind and a name.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"apiVersion": "v1","kind": "Namespace","metadata":{"name": "ns-sample"}}`))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"))
	f.Add([]byte("---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w, labels: {a: b}}\nspec: {replicas: 2}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objects, err := Decode(data)
		if err != nil {
			var docErr *DocumentError
			if !errors.As(err, &docErr) {
				t.Fatalf("error %v is not a DocumentError", err)
			}
			return
		}
		for _, o := range objects {
			if o.GetKind() == "" || o.GetName() == "" || o.GetAPIVersion() == "" {
				t.Fatalf("accepted an object without kind, name or apiVersion: %v", o.Object)
			}
			o.DeepCopy()
			if _, err := o.MarshalJSON(); err != nil {
				t.Fatalf("accepted an object that does not encode: %v", err)
			}
		}
	})
}

// A template's namespace may hold a variable, put in before each build is decoded in
// full; any other invalid namespace is still refused, and Decode refuses both.
func TestDecodeTemplateLeavesANamespacesVariableToTheBuild(t *testing.T) {
	withVariable := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: apps-${cluster.name}\n"
	invalid := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: Apps_1\n"
	if _, err := DecodeTemplate([]byte(withVariable)); err != nil {
		t.Errorf("DecodeTemplate(a namespace with a variable) = %v", err)
	}
	if _, err := Decode([]byte(withVariable)); err == nil {
		t.Error("Decode accepted a namespace with a variable in it")
	}
	if _, err := DecodeTemplate([]byte(invalid)); err == nil {
		t.Error("DecodeTemplate accepted an invalid namespace without a variable")
	}
}
