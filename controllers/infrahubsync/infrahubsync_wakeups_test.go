package infrahubsync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A sync is woken by what others do to its VidraResources, not by its own writes: its
// delivery of three artifacts lists Infrahub as often as a requested sync that writes
// nothing does (its creates do not sync it again), and a VidraResource edited by hand is
// restored with one sync more (its restoring write does not sync it again either). Its
// interval is an hour, so nothing else syncs it.
func TestASyncIsNotWokenByItsOwnWrites(t *testing.T) {
	member := fleet.Members[0]
	s := newInfrahub(t, "woken", infrahubtest.Options{})
	const ns = "ihs-woken"
	putSites(s, "main", ns, "v1", "paris", "lyon", "nice")
	newSync(t, "woken", "woken", s, withCluster(member.Name))
	allReady(t, "woken", 3)
	syncReady(t, "woken")
	settled := func() int {
		time.Sleep(time.Second) // would a sync have started, it would have listed by now
		return s.GraphQLRequests()
	}
	delivered := settled()

	updateSync(t, "woken", func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Annotations[vidrav1alpha1.RequestedAtAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	})
	waitGraphQLRequests(t, s, delivered+1)
	perSync := settled() - delivered
	if delivered != perSync {
		t.Errorf("delivering three artifacts made %d requests to Infrahub, a sync makes %d: the sync's creates synced it again", delivered, perSync)
	}

	before := s.GraphQLRequests()
	vr := &resourcesOf(t, "woken")[0]
	testfleet.Edit(t, fleet.Hub.Client, vr, func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest = artifact(ns, "paris", "edited") })
	testfleet.Eventually(t, 30*time.Second, "edited VidraResource restored", func() (bool, error) {
		cur := &vidrav1alpha1.VidraResource{}
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(vr), cur)
		return err == nil && !strings.Contains(cur.Spec.Manifest, "edited"), err
	})
	if got := settled() - before; got != perSync {
		t.Errorf("restoring an edited VidraResource made %d requests to Infrahub, a sync makes %d", got, perSync)
	}
}
