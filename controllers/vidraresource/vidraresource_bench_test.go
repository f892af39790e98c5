package vidraresource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// BenchmarkConverge measures how long 100 VidraResources of 10 ConfigMaps each, spread
// over the two members, take from creation to all Ready (run with -benchtime=1x).
func BenchmarkConverge(b *testing.B) {
	const resources, objectsEach = 100, 10
	ctx := context.Background()
	for n := range b.N {
		start := time.Now()
		names := make([]string, 0, resources)
		for i := range resources {
			name := fmt.Sprintf("bench-%d-%d", n, i)
			names = append(names, name)
			var docs []string
			for j := range objectsEach {
				docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-%d, namespace: default}\ndata: {k: v}\n", name, j))
			}
			vr := &vidrav1alpha1.VidraResource{}
			vr.Name = name
			vr.Spec.Destination.Cluster = fleet.Members[i%2].Name
			vr.Spec.Manifest = strings.Join(docs, "---\n")
			if err := fleet.Hub.Client.Create(ctx, vr); err != nil {
				b.Fatal(err)
			}
		}
		for _, name := range names {
			testfleet.Poll(b, 50*time.Millisecond, 5*time.Minute, name+" Ready", func() (bool, error) {
				vr := &vidrav1alpha1.VidraResource{}
				err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: name}, vr)
				return err == nil && vr.Status.DeployState == vidrav1alpha1.StateSucceeded, nil
			})
		}
		elapsed := time.Since(start)
		b.ReportMetric(elapsed.Seconds(), "converge-s")
		b.ReportMetric(float64(resources*objectsEach)/elapsed.Seconds(), "objects/s")
		b.StopTimer()
		for _, name := range names {
			remove(b, name)
		}
		b.StartTimer()
	}
}
