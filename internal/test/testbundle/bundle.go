// Package testbundle generates manifest bundles of real size for tests and the bench:
// KubeVirt's own CRDs (as generated from kubevirt.io/api into the repository), CRDs with
// large generated schemas and a custom resource of each, and ConfigMaps of filler data,
// until the bundle reaches the size asked for.
package testbundle

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Bundle is a generated manifest and what it holds.
type Bundle struct {
	Manifest []byte
	// CRDs are the names of its CustomResourceDefinitions.
	CRDs []string
	// CustomResources are "apiVersion kind name" of its custom resources.
	CustomResources []string
	// ConfigMaps are the names of its ConfigMaps (in the destination namespace).
	ConfigMaps []string
}

// Objects is how many objects the bundle holds.
func (b Bundle) Objects() int { return len(b.CRDs) + len(b.CustomResources) + len(b.ConfigMaps) }

// Options shape a bundle.
type Options struct {
	// MinBytes is the least size of the manifest.
	MinBytes int
	// Group is the API group of the generated CRDs; it tells bundles apart on one member.
	Group string
	// GeneratedCRDs is how many CRDs with large schemas it holds (3 when 0).
	GeneratedCRDs int
	// ConfigMapBytes is the filler data of each ConfigMap (16 KiB when 0).
	ConfigMapBytes int
	// Seed makes the filler data; bundles of different seeds differ.
	Seed uint64
	// WithoutKubeVirt leaves KubeVirt's CRDs out.
	WithoutKubeVirt bool
}

// New generates a bundle of at least opts.MinBytes.
func New(opts Options) (Bundle, error) {
	if opts.Group == "" {
		opts.Group = "bundle.example"
	}
	if opts.GeneratedCRDs == 0 {
		opts.GeneratedCRDs = 3
	}
	if opts.ConfigMapBytes == 0 {
		opts.ConfigMapBytes = 16 << 10
	}
	var b Bundle
	var out bytes.Buffer
	add := func(doc []byte) {
		if out.Len() > 0 {
			out.WriteString("---\n")
		}
		out.Write(doc)
		if !bytes.HasSuffix(doc, []byte("\n")) {
			out.WriteByte('\n')
		}
	}
	if !opts.WithoutKubeVirt {
		crds, err := KubeVirtCRDs()
		if err != nil {
			return b, err
		}
		for _, name := range slices.Sorted(maps.Keys(crds)) {
			add(crds[name])
			b.CRDs = append(b.CRDs, name)
		}
	}
	for i := range opts.GeneratedCRDs {
		kind := fmt.Sprintf("Generated%d", i)
		plural := strings.ToLower(kind) + "s"
		add(generatedCRD(opts.Group, kind, plural, 1200))
		b.CRDs = append(b.CRDs, plural+"."+opts.Group)
		add(fmt.Appendf(nil, "apiVersion: %s/v1\nkind: %s\nmetadata:\n  name: %s-sample\nspec:\n  field0: {name: sample, replicas: 1}\n", opts.Group, kind, strings.ToLower(kind)))
		b.CustomResources = append(b.CustomResources, fmt.Sprintf("%s/v1 %s %s-sample", opts.Group, kind, strings.ToLower(kind)))
	}
	r := rand.New(rand.NewPCG(opts.Seed, opts.Seed+1))
	for i := 0; out.Len() < opts.MinBytes; i++ {
		name := fmt.Sprintf("filler-%04d", i)
		var doc bytes.Buffer
		fmt.Fprintf(&doc, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n", name)
		for line := 0; doc.Len() < opts.ConfigMapBytes; line++ {
			fmt.Fprintf(&doc, "  key%03d: %s\n", line, filler(r, 100))
		}
		add(doc.Bytes())
		b.ConfigMaps = append(b.ConfigMaps, name)
	}
	b.Manifest = out.Bytes()
	return b, nil
}

// filler is n letters and digits that gzip shrinks by a quarter at most, as real
// configuration data (keys, certificates, addresses) does.
func filler(r *rand.Rand, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// generatedCRD is a namespaced CRD whose structural schema has fields properties, each
// an object of a few typed fields: the size of a real product's CRD.
func generatedCRD(group, kind, plural string, fields int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %s.%s
spec:
  group: %s
  names: {kind: %s, plural: %s}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
`, plural, group, group, kind, plural)
	for i := range fields {
		fmt.Fprintf(&b, `              field%d:
                type: object
                description: Field %d of %s, generated to give the CRD the size of a real one.
                properties:
                  name: {type: string, maxLength: 253}
                  replicas: {type: integer, minimum: 0}
                  enabled: {type: boolean}
`, i, i, kind)
	}
	return b.Bytes()
}

// KubeVirtCRDs are the VirtualMachine and VirtualMachineInstance CRDs that `make generate`
// writes from kubevirt.io/api, by CRD name.
func KubeVirtCRDs() (map[string][]byte, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, fmt.Errorf("locate the KubeVirt CRDs: no caller information")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "kubevirtsim", "testdata", "crds")
	crds := map[string][]byte{}
	for _, name := range []string{"virtualmachines.kubevirt.io", "virtualmachineinstances.kubevirt.io"} {
		plural, group, _ := strings.Cut(name, ".")
		data, err := os.ReadFile(filepath.Join(dir, group+"_"+plural+".yaml"))
		if err != nil {
			return nil, fmt.Errorf("read the KubeVirt CRDs: %w", err)
		}
		crds[name] = data
	}
	return crds, nil
}
