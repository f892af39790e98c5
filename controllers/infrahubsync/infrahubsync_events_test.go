package infrahubsync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// TestManyArtifactsGoneAtOnceCostFewEvents: artifacts that leave Infrahub together are
// named one Event each up to ten, and the rest are summed up in one Event, so a site
// decommissioned in bulk does not cost the hub a write per artifact.
func TestManyArtifactsGoneAtOnceCostFewEvents(t *testing.T) {
	s := newInfrahub(t, "gone", infrahubtest.Options{})
	const ns = "ihs-gone"
	var sites []string
	for i := range 25 {
		sites = append(sites, fmt.Sprintf("site-%02d", i))
	}
	putSites(s, "main", ns, "v1", sites...)
	newSync(t, "gone", "gone", s, withCluster(fleet.Members[0].Name))
	allReady(t, "gone", 25)

	for _, site := range sites[1:] {
		s.Delete("main", artifactName+"-"+site)
	}
	requestSync(t, "gone")
	allReady(t, "gone", 1)
	waitEvent(t, "gone", "ArtifactRemoved", "14 more artifacts no longer in Infrahub", "web (target site-11)", "and 4 others")

	var removed []string
	testfleet.Eventually(t, 10*time.Second, "the Events of the removals", func() (bool, error) {
		var list eventsv1.EventList
		if err := fleet.Hub.Client.List(context.Background(), &list); err != nil {
			return false, err
		}
		removed = removed[:0]
		for _, e := range list.Items {
			if e.Regarding.Name == "gone" && e.Reason == "ArtifactRemoved" {
				removed = append(removed, e.Note)
			}
		}
		return len(removed) >= 11, nil
	})
	if len(removed) != 11 {
		t.Errorf("24 artifacts removed at once recorded %d Events, want 10 one by one and one summing up the 14 more:\n%s",
			len(removed), strings.Join(removed, "\n"))
	}
}
