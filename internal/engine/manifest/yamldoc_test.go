package manifest

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// sameDocuments fails t where documentsOf and throughJSON read data differently: another
// object, another error, or another number of documents.
func sameDocuments(t *testing.T, data []byte) {
	t.Helper()
	got, want := documentsOf(data), throughJSON(data)
	for index := 0; ; index++ {
		g, gErr := got()
		w, wErr := want()
		if fmt.Sprint(gErr) != fmt.Sprint(wErr) {
			t.Fatalf("document[%d] of %q: error %v, want %v", index, data, gErr, wErr)
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("document[%d] of %q:\n got %#v\nwant %#v", index, data, g, w)
		}
		if wErr != nil {
			return
		}
	}
}

// The YAML whose conversion to JSON changes it, or which it refuses: numbers that JSON
// writes otherwise, keys that are not strings, tags, anchors, bytes that are not UTF-8,
// documents that are not objects.
var yamlAsJSONWouldReadIt = []string{
	"a: 1\nb: 1.0\nc: -0.0\nd: 1.5\ne: 1e21\nf: 1e20\ng: 9223372036854775807\nh: 9223372036854775808\ni: -9223372036854775808\nj: 0x1F\nk: 0o17\nl: 017\nm: 1_000\nn: 3.0e2\no: -1e-7\n",
	"a: yes\nb: no\nc: on\nd: off\ne: ~\nf: null\ng: True\nh: 'true'\ni: \"1\"\n",
	"a: .inf\n", "a: -.Inf\n", "a: .nan\n",
	"1: a\n", "true: b\n", "1.5: c\n", "~: d\n", "[1, 2]: e\n",
	"a: !!binary aGVsbG8=\n", "a: !!binary /w==\n", "a: !!str 12\n", "a: !!int '12'\n", "a: !!float 1\n",
	"a: 2001-12-14t21:59:43.10-05:00\nb: 2002-12-14\n",
	"base: &b {x: 1, y: [1, 2]}\nmore:\n  <<: *b\n  z: 3\n",
	"a: \"\\xff\\u00e9\"\n", "a: \"\\u2028<&>\"\n", "\"\\xff\": 1\n",
	"a:\n  - b: {c: [d, {e: f}]}\n  - []\n  - {}\n",
	"- a\n- b\n", "scalar\n", "null\n", "{}\n", "# only a comment\n",
	"---\n---\na: 1\n---\n# comment\n---\nnull\n---\nb: 2\n",
	"a: 1\n---\n{\"b\": 2}\n---\nc: [3\n",
	"a: b: c\n", "a:\n\t- b\n", "a: 1\na: 2\n",
	"  {\"a\": 1}\n{\"b\": 2.0}", "{\"a\": 1}\n---\nb: 2\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {x: '1'}}\ndata: {k: v, n: '5'}\n",
}

func TestYAMLDocumentsAreReadAsThroughJSON(t *testing.T) {
	for _, manifest := range yamlAsJSONWouldReadIt {
		sameDocuments(t, []byte(manifest))
	}
}

// FuzzYAMLDocumentsAsThroughJSON: whatever the input, the documents read are those the
// path through JSON reads, error for error.
func FuzzYAMLDocumentsAsThroughJSON(f *testing.F) {
	for _, manifest := range yamlAsJSONWouldReadIt {
		f.Add([]byte(manifest))
	}
	f.Fuzz(sameDocuments)
}

// BenchmarkDocuments reads a bundle of ConfigMaps, as each resync of a VidraResource
// does, both ways.
func BenchmarkDocuments(b *testing.B) {
	var bundle bytes.Buffer
	for i := range 10 {
		fmt.Fprintf(&bundle, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: site-a\n  labels: {app: web, tier: \"%d\"}\ndata:\n  key: value-%d\n  port: \"8080\"\n  config.yaml: |\n    replicas: 3\n    enabled: true\n", i, i, i)
	}
	ways := []struct {
		name string
		read func([]byte) func() (map[string]any, error)
	}{{"yaml", documentsOf}, {"through JSON", throughJSON}}
	for _, way := range ways {
		read := way.read
		b.Run(way.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				next := read(bundle.Bytes())
				for {
					if _, err := next(); err != nil {
						break
					}
				}
			}
		})
	}
}
