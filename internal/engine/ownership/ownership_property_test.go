package ownership_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestOwnersSetsStayTrueUnderConcurrentClaims is a randomized property test: several
// owners, each on its own worker (as one VidraResource is reconciled by one worker at a
// time), claim and release the same objects at random. Once they are done, every object
// exists exactly when some owner declares it, and its owners set is exactly the declaring
// owners. VIDRA_PROPERTY_STEPS and VIDRA_PROPERTY_SEED replay a run.
func TestOwnersSetsStayTrueUnderConcurrentClaims(t *testing.T) {
	const owners, objects = 4, 6
	steps := testfleet.EnvInt(t, "VIDRA_PROPERTY_STEPS", 1000)
	seed := uint64(testfleet.EnvInt(t, "VIDRA_PROPERTY_SEED", int(time.Now().UnixNano()%1_000_000)))
	t.Logf("%d steps, seed %d", steps, seed)

	ctx := context.Background()
	w := ownership.Writer{Client: cluster.Client}
	name := func(i int) string { return fmt.Sprintf("prop-%d", i) }
	declared := make([][objects]bool, owners)

	var group errgroup.Group
	for o := range owners {
		owner := fmt.Sprintf("hub/owner-%d", o)
		rng := rand.New(rand.NewPCG(seed, uint64(o)))
		group.Go(func() error {
			for range steps / owners {
				i := rng.IntN(objects)
				ref := configMapRef(name(i))
				if declared[o][i] {
					if _, err := w.Leave(ctx, ref, owner, true); err != nil {
						return fmt.Errorf("%s leaves %s: %w", owner, name(i), err)
					}
				} else if err := claim(ctx, w, ref, owner); err != nil {
					return fmt.Errorf("%s claims %s: %w", owner, name(i), err)
				}
				declared[o][i] = !declared[o][i]
			}
			return nil
		})
	}
	if err := group.Wait(); err != nil {
		t.Fatal(err)
	}

	for i := range objects {
		var want []string
		for o := range owners {
			if declared[o][i] {
				want = append(want, fmt.Sprintf("hub/owner-%d", o))
			}
		}
		cm, exists := get(t, name(i))
		switch {
		case len(want) == 0 && exists:
			t.Errorf("%s exists with owners %v, but nobody declares it", name(i), cm.Annotations[vidrav1alpha1.OwnersAnnotation])
		case len(want) > 0 && !exists:
			t.Errorf("%s is gone, but %v declare it", name(i), want)
		case exists:
			if got := ownersOf(t, name(i)); !slices.Equal(got, want) {
				t.Errorf("%s owners = %v, want %v", name(i), got, want)
			}
		}
	}
}

// claim is what applying an object does for ownership: create it if it is missing (as a
// server-side apply would), then join its owners set; when another owner's prune deleted
// it in between, start again.
func claim(ctx context.Context, w ownership.Writer, ref inventory.Ref, owner string) error {
	for {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: ref.Name, Namespace: ref.Namespace,
			Labels: map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue},
		}}
		if err := cluster.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		_, err := w.Join(ctx, ref, owner, false)
		if !errors.Is(err, ownership.ErrGone) {
			return err
		}
	}
}
