package sourcesync_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A new chart version rolls out wave by wave; one that cannot become healthy stops at
// the first wave, which rolls back to the version before, and the second wave never
// sees it. The history of a cluster's VidraResource lists the chart versions.
func TestHelmChartVersionRollsOutWaveByWave(t *testing.T) {
	const ns = "hs-waves"
	canary, prod := fleet.Members[0], fleet.Members[1]
	setRing(t, canary.Name, "canary")
	t.Cleanup(func() { setRing(t, canary.Name, "") })
	setRing(t, prod.Name, "prod")
	t.Cleanup(func() { setRing(t, prod.Name, "") })

	// Without the template that depends on the clusters' APIs: what another test left on
	// a member must not change what this one renders.
	repo := helmrepo.NewRepo(t)
	repo.Add(helmrepo.ChartWith(t, helmrepo.CapsChart, "1.0.0", map[string]string{"templates/widget.yaml": ""}))
	hs := helmSync("waves", repo.URL(), helmrepo.CapsChart, func(hs *vidrav1alpha1.HelmSync) {
		hs.Spec.Values = values(`{"greeting": "v1"}`)
		hs.Spec.Interval = &metav1.Duration{Duration: 3 * time.Second}
		hs.Spec.Destination, hs.Spec.Rollout = ringsInWaves(ns)
	})
	create(t, hs)
	waitRollout(t, hs, 1, vidrav1alpha1.RolloutCompleted)
	waitData(t, canary, ns, "waves-caps", "greeting", "v1")
	waitData(t, prod, ns, "waves-caps", "greeting", "v1")

	// A version that adds a Deployment, which never becomes available here: it stops at
	// the canary, which returns to 1.0.0.
	repo.Add(helmrepo.ChartWith(t, helmrepo.CapsChart, "2.0.0", map[string]string{
		"templates/widget.yaml": "",
		"templates/web.yaml":    unavailable,
		"templates/extra.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\ndata:\n  value: v2\n",
	}))
	// Found at the next interval.
	waitValue(t, canary, ns, "waves-extra", "v2")
	// Its revision number is not asserted: a cluster's APIs changing (another test's CRD
	// going) renders that cluster again, which is a revision too.
	testfleet.Eventually(t, 90*time.Second, "2.0.0 rolled back", func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(hs), hs); err != nil {
			return false, err
		}
		r := hs.Status.Rollout
		return r != nil && r.Phase == vidrav1alpha1.RolloutRolledBack && hs.Status.Source.Revision == "2.0.0", nil
	})
	if !slices.Equal(hs.Status.Rollout.FailedClusters, []string{canary.Name}) {
		t.Errorf("failed clusters %v, want the canary", hs.Status.Rollout.FailedClusters)
	}
	waitValue(t, canary, ns, "waves-extra", "") // back to 1.0.0, which has none
	if v := valueOf(t, prod, ns, "waves-extra"); v != "" {
		t.Errorf("the prod wave has 2.0.0's ConfigMap (%q): it must never see 2.0.0", v)
	}
	if v := dataOf(t, prod, ns, "waves-caps", "greeting"); v != "v1" {
		t.Errorf("the prod wave's ConfigMap has greeting %q, want it kept", v)
	}
	waitEvent(t, hs, vidrav1alpha1.ReasonRolledBack, fmt.Sprintf("revision %d", hs.Status.Rollout.Revision))

	// A cluster leaving the selection and joining again is no new revision of the sync:
	// the rolled-back version is not tried on the canary again.
	failed := hs.Status.Rollout.Revision
	setRing(t, prod.Name, "")
	waitData(t, prod, ns, "waves-caps", "greeting", "") // left: pruned
	setRing(t, prod.Name, "prod")
	deadline := time.Now().Add(10 * time.Second) // three intervals
	for time.Now().Before(deadline) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(hs), hs); err != nil {
			t.Fatal(err)
		}
		if r := hs.Status.Rollout; r.Revision != failed || r.Phase != vidrav1alpha1.RolloutRolledBack {
			t.Fatalf("after a cluster rejoined, the rollout is at revision %d, %s; want revision %d still rolled back", r.Revision, r.Phase, failed)
		}
		if v := valueOf(t, canary, ns, "waves-extra"); v != "" {
			t.Fatalf("the canary got the rolled-back version again (%q) when a cluster rejoined", v)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
