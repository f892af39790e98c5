// Package manifest decodes a VidraResource's manifest — multi-document YAML or JSON,
// with List kinds expanded — into objects, and validates the whole bundle before anything
// is applied, naming the document that is wrong.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// DocumentError is a document of the manifest that cannot be used. Index counts the
// documents of the manifest from 0; Item, for a List, counts its items from 0.
type DocumentError struct {
	Index int
	Item  int // -1 when the document is not a List item
	Err   error
}

func (e *DocumentError) Error() string {
	if e.Item >= 0 {
		return fmt.Sprintf("document[%d] item[%d]: %v", e.Index, e.Item, e.Err)
	}
	return fmt.Sprintf("document[%d]: %v", e.Index, e.Err)
}

func (e *DocumentError) Unwrap() error { return e.Err }

// Decode returns the objects of a manifest in the order written. Empty documents are
// skipped; a List's items take its place. The first document that fails decoding or
// validation stops the decode with a *DocumentError, so nothing of a broken bundle is
// applied.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	return decode(data, false)
}

// DecodeTemplate is Decode for a bundle whose variables are put in for each cluster
// before it is decoded again (a sync's spec.postBuild): a metadata.namespace holding a
// ${...} reference, such as apps-${cluster.name}, is checked then, as Flux's postBuild
// allows it.
func DecodeTemplate(data []byte) ([]*unstructured.Unstructured, error) {
	return decode(data, true)
}

func decode(data []byte, template bool) ([]*unstructured.Unstructured, error) {
	next := documentsOf(data)
	var objects []*unstructured.Unstructured
	seen := map[string]int{}
	for index := 0; ; index++ {
		doc, err := next()
		if errors.Is(err, io.EOF) {
			return objects, nil
		}
		if err != nil {
			return nil, &DocumentError{Index: index, Item: -1, Err: err}
		}
		if len(doc) == 0 {
			continue
		}
		items, err := expand(doc, index)
		if err != nil {
			return nil, err
		}
		for i, obj := range items {
			item := -1
			if isList(doc) {
				item = i
			}
			if err := validate(obj, template); err != nil {
				return nil, &DocumentError{Index: index, Item: item, Err: err}
			}
			id := identity(obj)
			if first, dup := seen[id]; dup {
				return nil, &DocumentError{Index: index, Item: item, Err: fmt.Errorf("%s is declared twice (first in document[%d])", id, first)}
			}
			seen[id] = index
			objects = append(objects, obj)
		}
	}
}

// documentsOf returns the function that reads the manifest's next document: nil for an
// empty one, io.EOF after the last. A JSON stream (the first bytes an object) is read by
// apimachinery's decoder; YAML one document at a time (yamlDocuments).
func documentsOf(data []byte) func() (map[string]any, error) {
	if yaml.IsJSONBuffer(data[:min(len(data), sniffed)]) {
		return throughJSON(data)
	}
	return yamlDocuments(data)
}

// throughJSON reads the documents with apimachinery's YAML-or-JSON decoder, each made
// JSON (by sigs.k8s.io/yaml, if YAML) and decoded by utiljson: the way every manifest was
// read before yamlDocuments, which must agree with it.
func throughJSON(data []byte) func() (map[string]any, error) {
	decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), sniffed)
	return func() (map[string]any, error) {
		var raw json.RawMessage
		if err := decoder.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
		}
		return objectOf(raw)
	}
}

// sniffed is how much of a manifest is looked at to tell JSON from YAML, as
// yaml.NewYAMLOrJSONDecoder does.
const sniffed = 4096

// objectOf is the object a document's JSON holds: nil when it is empty or null.
func objectOf(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	// utiljson keeps integers as int64, as unstructured objects need them.
	var doc map[string]any
	if err := utiljson.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	return doc, nil
}

func isList(doc map[string]any) bool {
	kind, _ := doc["kind"].(string)
	_, hasItems := doc["items"]
	return strings.HasSuffix(kind, "List") && hasItems
}

// expand returns the objects of one document: itself, or a List's items.
func expand(doc map[string]any, index int) ([]*unstructured.Unstructured, error) {
	if !isList(doc) {
		return []*unstructured.Unstructured{{Object: doc}}, nil
	}
	raw, ok := doc["items"].([]any)
	if !ok && doc["items"] != nil {
		return nil, &DocumentError{Index: index, Item: -1, Err: errors.New("items of a List must be a list")}
	}
	items := make([]*unstructured.Unstructured, 0, len(raw))
	for i, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, &DocumentError{Index: index, Item: i, Err: errors.New("a List item must be an object")}
		}
		items = append(items, &unstructured.Unstructured{Object: m})
	}
	return items, nil
}

// validate checks what every object needs before it can be mapped and applied; in a
// template, a namespace with a variable in it is left to the decode of each build.
func validate(obj *unstructured.Unstructured, template bool) error {
	apiVersion, ok := obj.Object["apiVersion"].(string)
	if !ok || apiVersion == "" {
		return errors.New("apiVersion is missing or not a string")
	}
	if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
		return fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	kind, ok := obj.Object["kind"].(string)
	if !ok || kind == "" {
		return errors.New("kind is missing or not a string")
	}
	metadata, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return fmt.Errorf("%s: metadata is missing or not an object", kind)
	}
	name, ok := metadata["name"].(string)
	if !ok || name == "" {
		return fmt.Errorf("%s: metadata.name is missing or not a string (generateName cannot be applied)", kind)
	}
	if errs := content.IsPathSegmentName(name); len(errs) > 0 {
		return fmt.Errorf("%s %q: metadata.name %s", kind, name, strings.Join(errs, "; "))
	}
	if ns, present := metadata["namespace"]; present {
		s, ok := ns.(string)
		variable := template && strings.Contains(s, "${")
		if !ok || (s != "" && len(validation.IsDNS1123Label(s)) > 0 && !variable) {
			return fmt.Errorf("%s %q: metadata.namespace %v is not a valid namespace name", kind, name, ns)
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		if v, present := metadata[field]; present && v != nil {
			m, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("%s %q: metadata.%s is not a map", kind, name, field)
			}
			for k, val := range m {
				if _, ok := val.(string); !ok {
					return fmt.Errorf("%s %q: metadata.%s[%s] is not a string", kind, name, field, k)
				}
			}
		}
	}
	return nil
}

// identity names an object within a bundle: group, kind, namespace and name.
func identity(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	id := gvk.Kind
	if gvk.Group != "" {
		id += "." + gvk.Group
	}
	if ns := obj.GetNamespace(); ns != "" {
		return id + " " + ns + "/" + obj.GetName()
	}
	return id + " " + obj.GetName()
}
