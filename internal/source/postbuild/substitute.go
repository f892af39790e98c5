// Package postbuild substitutes variables in a bundle once it is built, for each
// cluster, as Flux's kustomize-controller does with a Kustomization's spec.postBuild:
// ${var}, ${var:=default} and the rest of Flux's envsubst syntax, $${ for a literal ${,
// and an object annotated substitute: disabled left alone. Beside the sync's variables,
// ${cluster.name} and ${cluster.labels.KEY} are the destination cluster's.
//
// Unlike Flux's default, a variable that is not set is an error naming it, never an
// empty string: a missing variable is far more often a mistake than a wish.
package postbuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/fluxcd/pkg/envsubst"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Template is a bundle ready to be substituted for each cluster: its documents, each as
// written (renamed per-cluster variables aside), and the per-cluster variables they name.
type Template struct {
	docs []document
	refs Refs
}

type document struct {
	text    string
	literal bool   // annotated substitute: disabled, or empty
	object  string // "Kind namespace/name", for errors
}

// Parse reads a bundle (a YAML stream, as the sources build it) for substitution. A
// ${…} that cannot be read, and a ${cluster.…} that is not known, are errors naming the
// object.
func Parse(bundle []byte) (*Template, error) {
	t := &Template{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(bundle)))
	for {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, fmt.Errorf("split YAML documents: %w", err)
		}
		doc, refs, err := parseDocument(raw)
		if err != nil {
			return nil, err
		}
		t.docs = append(t.docs, doc)
		t.refs.add(refs)
	}
}

// head is what a document's object says of itself.
type head struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

func parseDocument(raw []byte) (document, Refs, error) {
	var h head
	if err := yaml.Unmarshal(raw, &h); err != nil {
		return document{}, Refs{}, fmt.Errorf("not valid YAML: %w", err)
	}
	doc := document{text: string(raw), object: objectName(h)}
	a := h.Metadata.Annotations
	if h.Kind == "" || a[vidrav1alpha1.SubstituteAnnotation] == vidrav1alpha1.SubstituteDisabled ||
		a[vidrav1alpha1.FluxSubstituteAnnotation] == vidrav1alpha1.SubstituteDisabled {
		doc.literal = true
		return doc, Refs{}, nil
	}
	text, refs, err := rewrite(doc.text)
	if err != nil {
		return document{}, Refs{}, fmt.Errorf("%s: %w", doc.object, err)
	}
	// Read once here, so that what cannot be read is said once, not for every cluster.
	if _, err := envsubst.Eval(text, func(string) (string, bool) { return "", true }); err != nil {
		return document{}, Refs{}, fmt.Errorf("%s: %w", doc.object, err)
	}
	doc.text = text
	return doc, refs, nil
}

func objectName(h head) string {
	if h.Metadata.Namespace != "" {
		return h.Kind + " " + h.Metadata.Namespace + "/" + h.Metadata.Name
	}
	return strings.TrimSpace(h.Kind + " " + h.Metadata.Name)
}

// Refs are the per-cluster variables the bundle names.
func (t *Template) Refs() Refs { return t.refs }

// Substitute is the bundle with vars and c's variables put in. A variable neither sets
// (with no default) is an error naming it, the object, and for a label the cluster.
func (t *Template) Substitute(vars map[string]string, c Cluster) ([]byte, error) {
	var out bytes.Buffer
	for i, doc := range t.docs {
		if i > 0 {
			out.WriteString("---\n")
		}
		if doc.literal {
			out.WriteString(doc.text)
			continue
		}
		text, err := substitute(doc, vars, c)
		if err != nil {
			return nil, err
		}
		out.WriteString(text)
	}
	return out.Bytes(), nil
}

func substitute(doc document, vars map[string]string, c Cluster) (string, error) {
	// The last variable found unset: envsubst stops at the first that has no default.
	var unset string
	text, err := envsubst.Eval(doc.text, func(name string) (string, bool) {
		if value, written, isCluster, ok := clusterValue(name, c); isCluster {
			if !ok {
				unset = fmt.Sprintf("%s: cluster %s has no such label", written, c.Name)
			}
			return value, ok
		}
		value, ok := vars[name]
		if !ok {
			unset = fmt.Sprintf("${%s} is not set: set it in spec.postBuild, or give it a default, as ${%s:=value}", name, name)
		}
		return value, ok
	})
	switch {
	case err != nil && unset != "":
		return "", fmt.Errorf("%s: %s", doc.object, unset)
	case err != nil:
		return "", fmt.Errorf("%s: %w", doc.object, err)
	}
	return text, nil
}

var validName = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// ValidName says whether name can be a variable's: letters, digits and underscores, not
// beginning with a digit (as Flux), and not "__vidra_…", which names the cluster's.
func ValidName(name string) bool {
	return validName.MatchString(name) && !strings.HasPrefix(name, reservedPrefix)
}
