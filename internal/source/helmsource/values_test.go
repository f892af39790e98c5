package helmsource_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
)

func TestClusterValuesSubstituteNameAndLabels(t *testing.T) {
	c := helmsource.Cluster{Name: "eu-1", Labels: map[string]string{"region": "eu", "topology.kubernetes.io/zone": "eu-1a"}}
	in := map[string]any{
		"cluster": "${cluster.name}",
		"nested": map[string]any{
			"list":            []any{"in ${cluster.labels.region}", 3, map[string]any{"zone": "${cluster.labels.topology.kubernetes.io/zone}"}},
			"${cluster.name}": "keys stay",
			"literal":         "$${cluster.name} and $5",
			"twice":           "${cluster.name}/${cluster.name}",
		},
		"n": 1.5,
	}
	got, err := helmsource.ClusterValues(in, c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"cluster": "eu-1",
		"nested": map[string]any{
			"list":            []any{"in eu", 3, map[string]any{"zone": "eu-1a"}},
			"${cluster.name}": "keys stay",
			"literal":         "${cluster.name} and $5",
			"twice":           "eu-1/eu-1",
		},
		"n": 1.5,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if in["cluster"] != "${cluster.name}" {
		t.Fatal("ClusterValues changed its input")
	}
}

func TestClusterValuesRefuseUnknownReferences(t *testing.T) {
	c := helmsource.Cluster{Name: "eu-1", Labels: map[string]string{"region": "eu"}}
	for value, says := range map[string]string{
		"${cluster.labels.tier}": `"tier"`,
		"${cluster.uid}":         "${cluster.uid}",
		"${oops":                 "closing",
	} {
		_, err := helmsource.ClusterValues(map[string]any{"a": []any{value}}, c)
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: error %v, want one saying %s", value, err, says)
		}
	}
}

func TestMergeValuesLaterLayersWin(t *testing.T) {
	base := map[string]any{"a": map[string]any{"x": 1, "y": 2}, "list": []any{1, 2}, "keep": true}
	over := map[string]any{"a": map[string]any{"y": 3, "z": 4}, "list": []any{9}}
	got := helmsource.MergeValues(base, nil, over)
	want := map[string]any{"a": map[string]any{"x": 1, "y": 3, "z": 4}, "list": []any{9}, "keep": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if base["a"].(map[string]any)["y"] != 2 {
		t.Fatal("MergeValues changed a layer")
	}
}

func TestParseValues(t *testing.T) {
	for doc, want := range map[string]map[string]any{
		"a: 1\nb: [x]\n":    {"a": float64(1), "b": []any{"x"}},
		`{"a": {"b": "c"}}`: {"a": map[string]any{"b": "c"}},
		"":                  {},
		"# only a comment":  {},
	} {
		got, err := helmsource.ParseValues([]byte(doc))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseValues(%q) = %v, %v; want %v", doc, got, err, want)
		}
	}
	for _, doc := range []string{"- a\n- b\n", "just a string", "a: [unclosed"} {
		if _, err := helmsource.ParseValues([]byte(doc)); err == nil {
			t.Errorf("ParseValues(%q) accepted a document that is not a map", doc)
		}
	}
}
