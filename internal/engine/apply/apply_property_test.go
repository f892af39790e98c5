package apply_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestOwnersStayTrueWhenApplyingAndReleasingAtRandom is a randomized property test of
// the engine: several owners, each on its own worker, declare and drop the same objects
// at random. An owner creates what it never applied without reading it first, applies
// again what it declares (half of them from their Memo), and releases (pruning) what it
// drops; half of the owners share Latches, as owners of one process do, the others race
// as owners of separate processes.
// After each apply the owner is in the object's owners set, whatever the others do; once
// they are done, every object exists exactly when some owner declares it, and its owners
// set is exactly the declaring owners. VIDRA_PROPERTY_STEPS and VIDRA_PROPERTY_SEED
// replay a run.
func TestOwnersStayTrueWhenApplyingAndReleasingAtRandom(t *testing.T) {
	const holders, objects = 4, 5
	steps := testfleet.EnvInt(t, "VIDRA_PROPERTY_STEPS", 400)
	seed := uint64(testfleet.EnvInt(t, "VIDRA_PROPERTY_SEED", int(time.Now().UnixNano()%1_000_000)))
	t.Logf("%d steps, seed %d", steps, seed)
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("random-%d", i) }
	declared := make([][objects]bool, holders)
	var latches apply.Latches

	var group errgroup.Group
	for o := range holders {
		e := engine(t, fmt.Sprintf("hub/random-%d", o))
		if o%2 == 0 {
			e.Latches = &latches
		}
		if o%4 < 2 {
			e.Memo = &apply.Memo{}
		}
		rng := rand.New(rand.NewPCG(seed, uint64(o)))
		group.Go(func() error {
			for range steps / holders {
				i := rng.IntN(objects)
				e.Applied = func(inventory.Ref) bool { return declared[o][i] }
				if declared[o][i] && rng.IntN(3) > 0 {
					if _, err := e.Release(ctx, []inventory.Ref{cmRef(name(i))}, true); err != nil {
						return fmt.Errorf("%s releases %s: %w", e.Owner, name(i), err)
					}
					declared[o][i] = false
					continue
				}
				if _, err := e.Apply(ctx, decode(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {k: v}\n", name(i)))); err != nil {
					return fmt.Errorf("%s applies %s: %w", e.Owner, name(i), err)
				}
				declared[o][i] = true
				// Whatever the others do meanwhile, an owner that declares an object is in
				// its owners set.
				if err := ownedBy(ctx, name(i), e.Owner); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := group.Wait(); err != nil {
		t.Fatal(err)
	}

	for i := range objects {
		var want []string
		for o := range holders {
			if declared[o][i] {
				want = append(want, fmt.Sprintf("hub/random-%d", o))
			}
		}
		cm, exists := configMap(t, name(i))
		switch {
		case len(want) == 0 && exists:
			t.Errorf("%s exists with owners %v, but nobody declares it", name(i), cm.Annotations[vidrav1alpha1.OwnersAnnotation])
		case len(want) > 0 && !exists:
			t.Errorf("%s is gone, but %v declare it", name(i), want)
		case exists && !slices.Equal(owners(t, cm), want):
			t.Errorf("%s owners = %v, want %v", name(i), owners(t, cm), want)
		}
	}
}

func ownedBy(ctx context.Context, name, owner string) error {
	cm := &corev1.ConfigMap{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cm); err != nil {
		return fmt.Errorf("%s declares %s: %w", owner, name, err)
	}
	owners, err := ownership.Owners(cm)
	if err != nil {
		return err
	}
	if !slices.Contains(owners, owner) {
		return fmt.Errorf("%s declares %s, which is owned by %v", owner, name, owners)
	}
	return nil
}
