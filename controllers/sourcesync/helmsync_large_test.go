package sourcesync_test

import (
	"fmt"
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

// A chart whose rendering is of real size — hundreds of KiB, over what a VidraResource
// holds inline — reaches both members through the content store, each cluster with its
// own rendering.
func TestHelmChartOfRealSizeGoesThroughTheContentStore(t *testing.T) {
	const ns, count = "hs-large", 60
	repo := helmrepo.NewRepo(t)
	repo.Add(helmrepo.ChartWith(t, helmrepo.CapsChart, "1.0.0", map[string]string{
		"templates/widget.yaml": "",
		"templates/many.yaml": fmt.Sprintf(`{{- range $i := until %d }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: big-{{ $i }}
data:
  value: {{ $.Values.cluster | quote }}
  blob: {{ repeat 8000 "x" | quote }}
{{- end }}
`, count),
	}))
	hs := helmSync("large", repo.URL(), helmrepo.CapsChart, func(hs *vidrav1alpha1.HelmSync) {
		hs.Spec.Destination = everyMember(ns)
		hs.Spec.Values = values(`{"cluster": "${cluster.name}"}`)
	})
	create(t, hs)
	readyAt(t, hs, "1.0.0")
	last := fmt.Sprintf("big-%d", count-1)
	for _, m := range fleet.Members {
		waitValue(t, m, ns, last, m.Name)
	}
	vrs := resourcesOf(t, hs)
	if len(vrs) != 2 {
		t.Fatalf("%d VidraResources, want one per member", len(vrs))
	}
	digests := map[string]bool{}
	for _, vr := range vrs {
		if vr.Spec.Content == nil || vr.Spec.Manifest != "" {
			t.Fatalf("%s holds its %d-ConfigMap rendering inline, want it by reference to the content store", vr.Name, count)
		}
		digests[vr.Spec.Content.Digest] = true
	}
	if len(digests) != 2 {
		t.Errorf("the members share a rendering (%v), though each has its own name in it", digests)
	}
}
