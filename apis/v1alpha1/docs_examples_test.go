package v1alpha1_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// yamlBlock is a YAML example of a page: a fenced block, or the here-document of a
// shell example (kubectl apply -f - <<'YAML').
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```|<<'YAML'\n(.*?)\nYAML\n")

// Every example of Vidra's kinds in the user docs is what the API server accepts as it is
// written: each YAML example naming the group is created on a real kube-apiserver with the
// CRDs (server-side dry run, unknown fields refused).
func TestTheDocsExamplesAreAccepted(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md")
	checked := map[string]int{}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range yamlBlock.FindAllSubmatch(text, -1) {
			example := block[1] // a fenced block, else a here-document
			if example == nil {
				example = block[2]
			}
			for _, obj := range examplesIn(t, page, example) {
				err := hub.Client.Create(context.Background(), obj, client.DryRunAll, client.FieldValidation("Strict"))
				if err != nil {
					t.Errorf("%s: %s %s: %v", filepath.Base(page), obj.GetKind(), obj.GetName(), err)
				}
				checked[obj.GetKind()]++
			}
		}
	}
	for _, kind := range vidrav1alpha1.SyncKinds() {
		if checked[kind.Kind] == 0 {
			t.Errorf("no example of %s was found in the docs", kind.Kind)
		}
	}
	t.Logf("examples checked, by kind: %v", checked)
}

// examplesIn are the objects of Vidra's group a YAML block holds; other documents (a
// status, a fragment of a spec) are left out.
func examplesIn(t *testing.T, page string, block []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(block), 4096)
	for {
		var doc map[string]any
		if err := decoder.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: a YAML example does not parse: %v\n%s", filepath.Base(page), err, block)
		}
		obj := &unstructured.Unstructured{Object: doc}
		if !strings.HasPrefix(obj.GetAPIVersion(), vidrav1alpha1.GroupVersion.Group+"/") || obj.GetName() == "" {
			continue
		}
		out = append(out, obj)
	}
}
