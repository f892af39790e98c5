package sourcesync_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/ociregistry"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// widgetSize reads spec.size of a Widget on c (-1 when absent or unset).
func widgetSize(t *testing.T, c *testfleet.Cluster, ns, name string) int64 {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.vidra.dev/v1")
	w.SetKind("Widget")
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
		return -1
	}
	size, found, _ := unstructured.NestedInt64(w.Object, "spec", "size")
	if !found {
		return -1
	}
	return size
}

// A chart from an OCI registry brings a CRD no member has, with its custom resource, to
// both members; a newer version in the range changes the CRD, and the CRD is upgraded
// with the chart (helm upgrade never touches crds/): the new field of the custom
// resource is kept, where the old schema would prune it.
func TestHelmChartFromAnOCIRegistryUpgradesItsCRDs(t *testing.T) {
	const ns = "hs-crds"
	reg := ociregistry.New(t)
	url := helmrepo.PushOCI(t, reg, "charts", helmrepo.Chart(t, helmrepo.CRDsChart, "1.0.0"))
	hs := helmSync("widgets", url, helmrepo.CRDsChart, func(hs *vidrav1alpha1.HelmSync) {
		hs.Spec.Source.Version = ">=1.0.0 <2.0.0"
		hs.Spec.Destination = everyMember(ns)
	})
	create(t, hs)
	readyAt(t, hs, "1.0.0")
	for _, m := range fleet.Members {
		waitData(t, m, ns, "widgets-config", "chartVersion", "1.0.0")
		testfleet.Eventually(t, 60*time.Second, "Widget widgets on "+m.Name, func() (bool, error) {
			w := &unstructured.Unstructured{}
			w.SetAPIVersion("example.vidra.dev/v1")
			w.SetKind("Widget")
			return m.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "widgets"}, w) == nil, nil
		})
	}

	withSize := helmrepo.ChartWith(t, helmrepo.CRDsChart, "1.1.0", map[string]string{
		helmrepo.WidgetsCRDPath: helmrepo.WidgetsCRDWithSize(t),
		"templates/widget.yaml": `apiVersion: example.vidra.dev/v1
kind: Widget
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
spec:
  color: {{ .Values.color | quote }}
  size: 3
`,
	})
	helmrepo.PushOCI(t, reg, "charts", withSize)
	helmrepo.PushOCI(t, reg, "charts", helmrepo.Chart(t, helmrepo.CRDsChart, "2.0.0")) // out of range
	requestSync(t, hs)
	readyAt(t, hs, "1.1.0")
	for _, m := range fleet.Members {
		waitData(t, m, ns, "widgets-config", "chartVersion", "1.1.0")
		testfleet.Eventually(t, 60*time.Second, "Widget widgets on "+m.Name+" with spec.size 3", func() (bool, error) {
			return widgetSize(t, m, ns, "widgets") == 3, nil
		})
	}
}
