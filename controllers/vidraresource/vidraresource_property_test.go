package vidraresource_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestOwnersMatchTheDeclaringResourcesAfterRandomChurn is a randomized property test:
// several VidraResources add and drop the same objects from their bundles at random, all
// at once, with several workers reconciling them. Once every VidraResource has caught up,
// every object exists exactly when some VidraResource declares it, and its owners set is
// exactly those VidraResources. VIDRA_PROPERTY_STEPS and VIDRA_PROPERTY_SEED replay a run.
func TestOwnersMatchTheDeclaringResourcesAfterRandomChurn(t *testing.T) {
	const resources, objects = 4, 6
	steps := testfleet.EnvInt(t, "VIDRA_PROPERTY_STEPS", 1000)
	seed := uint64(testfleet.EnvInt(t, "VIDRA_PROPERTY_SEED", int(time.Now().UnixNano()%1_000_000)))
	t.Logf("%d steps, seed %d", steps, seed)
	ctx := context.Background()
	member := fleet.Members[1]
	vrName := func(i int) string { return fmt.Sprintf("churn-%d", i) }
	objName := func(i int) string { return fmt.Sprintf("churned-%d", i) }
	bundle := func(declared [objects]bool) string {
		var docs []string
		for i, d := range declared {
			if d {
				docs = append(docs, cmManifest(objName(i)))
			}
		}
		return strings.Join(docs, "---\n")
	}
	declared := make([][objects]bool, resources)
	for r := range resources {
		deliver(t, vrName(r), vidrav1alpha1.Destination{Cluster: member.Name, ReconcileOnEvents: true}, "")
	}

	var group errgroup.Group
	for r := range resources {
		rng := rand.New(rand.NewPCG(seed, uint64(r)))
		group.Go(func() error {
			for range steps / resources {
				i := rng.IntN(objects)
				declared[r][i] = !declared[r][i]
				manifest := bundle(declared[r])
				// A merge patch, as kubectl patch would: status writes by the controller do
				// not make it conflict.
				patch := fmt.Sprintf(`{"spec":{"manifest":%q}}`, manifest)
				vr := &vidrav1alpha1.VidraResource{}
				vr.Name = vrName(r)
				if err := fleet.Hub.Client.Patch(ctx, vr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := group.Wait(); err != nil {
		t.Fatal(err)
	}

	// On failure, show every object with its field managers: what is needed to tell a
	// race from a rule broken.
	defer func() {
		if t.Failed() {
			for i := range objects {
				cm := &corev1.ConfigMap{}
				if exists(t, member, cm, "default", objName(i)) {
					t.Logf("%s: labels %v, annotations %v, data %v, managed fields:", objName(i), cm.Labels, cm.Annotations, cm.Data)
					for _, mf := range cm.ManagedFields {
						t.Logf("  %s %s %s %s", mf.Manager, mf.Operation, mf.Time, mf.FieldsV1.GetRawString())
					}
				}
			}
		}
	}()
	// Quiesce: every VidraResource has reconciled its last spec and is Ready.
	for r := range resources {
		testfleet.Eventually(t, 60*time.Second, vrName(r)+" caught up", func() (bool, error) {
			vr := &vidrav1alpha1.VidraResource{}
			if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: vrName(r)}, vr); err != nil {
				return false, err
			}
			return vr.Status.ObservedGeneration == vr.Generation && vr.Status.DeployState == vidrav1alpha1.StateSucceeded,
				fmt.Errorf("generation %d observed %d, %s: %s", vr.Generation, vr.Status.ObservedGeneration, vr.Status.DeployState, vr.Status.LastError)
		})
	}

	for i := range objects {
		var want []string
		for r := range resources {
			if declared[r][i] {
				want = append(want, "hub/"+vrName(r))
			}
		}
		cm := &corev1.ConfigMap{}
		present := exists(t, member, cm, "default", objName(i))
		switch {
		case len(want) == 0 && present:
			t.Errorf("%s exists (owners %s) but no VidraResource declares it", objName(i), cm.Annotations[vidrav1alpha1.OwnersAnnotation])
		case len(want) > 0 && !present:
			t.Errorf("%s is missing but %v declare it", objName(i), want)
		case present && !slices.Equal(ownersOf(t, cm), want):
			t.Errorf("%s owners = %v, want %v", objName(i), ownersOf(t, cm), want)
		}
	}
}
