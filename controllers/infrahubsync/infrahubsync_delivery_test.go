package infrahubsync_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// One artifact name rendered for three targets becomes three VidraResources on the
// destination; unchanged checksums download nothing; changed content is downloaded once
// and applied; a removed artifact takes its objects with it but not the shared ones.
func TestArtifactsAreDeliveredDownloadedOnlyWhenChangedAndRemovedWithTheirObjects(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	s := newInfrahub(t, "delivery", infrahubtest.Options{})
	const ns = "ihs-delivery"
	putSites(s, "main", ns, "v1", "paris", "lyon", "nice")
	before := downloads(t)

	newSync(t, "delivery", "delivery", s, withCluster(member.Name), func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Spec.Interval = &metav1.Duration{Duration: time.Second}
	})

	// Three VidraResources, all Ready, their objects on the member.
	vrs := allReady(t, "delivery", 3)
	for _, vr := range vrs {
		if vr.Spec.Destination.Cluster != member.Name || !metav1.IsControlledBy(&vr, getSync(t, "delivery")) ||
			!strings.HasPrefix(vr.Name, "delivery-"+member.Name+"-") {
			t.Errorf("VidraResource %s: destination %+v, owners %v", vr.Name, vr.Spec.Destination, vr.OwnerReferences)
		}
	}
	for _, site := range []string{"paris", "lyon", "nice"} {
		waitValue(t, member, ns, site, "v1")
	}
	ihs := syncReady(t, "delivery")
	if ihs.Status.SyncState != vidrav1alpha1.StateSucceeded || len(ihs.Status.Artifacts) != 3 || len(ihs.Status.Checksums) != 3 ||
		ihs.Status.LastSyncTime == nil || ihs.Status.LastError != "" {
		t.Errorf("status = %+v", ihs.Status)
	}
	for _, a := range ihs.Status.Artifacts {
		if a.Name != "web" || a.Target == "" || a.Definition != "web-definition" || len(a.Checksum) != 32 || len(a.VidraResources) != 1 {
			t.Errorf("artifact status %+v", a)
		}
	}
	waitEvent(t, "delivery", "BundleAdded", "web-paris", "paris")
	if got := downloads(t) - before; got != 3 {
		t.Errorf("%v downloads for three new artifacts, want 3", got)
	}
	if got := testfleet.MetricValue(t, registry, "vidra_infrahub_requests_total", map[string]string{"code": "200"}); got < 4 {
		t.Errorf("vidra_infrahub_requests_total{code=200} = %v, want at least the listing and 3 downloads", got)
	}

	// Several intervals with nothing changed: nothing downloaded.
	listed := s.GraphQLRequests()
	waitGraphQLRequests(t, s, listed+3)
	if got := downloads(t) - before; got != 3 || s.TotalDownloads() != 3 {
		t.Errorf("after 3 more listings with unchanged checksums: %v downloads (double counts %d), want 3", got, s.TotalDownloads())
	}

	// One artifact changes: one download, the member follows.
	s.Put("main", infrahubtest.Artifact{ID: "web-lyon", Name: "web", Content: artifact(ns, "lyon", "v2"), TargetLabel: "lyon", DefinitionName: "web-definition"})
	waitValue(t, member, ns, "lyon", "v2")
	if s.Downloads("web-lyon") != 2 || s.TotalDownloads() != 4 {
		t.Errorf("downloads after one change: web-lyon %d, total %d; want 2 and 4", s.Downloads("web-lyon"), s.TotalDownloads())
	}
	waitEvent(t, "delivery", "BundleUpdated", "web-lyon")

	// One artifact goes: its VidraResource and ConfigMap go; the Namespace the others
	// still use stays.
	s.Delete("main", "web-nice")
	allReady(t, "delivery", 2)
	waitValue(t, member, ns, "nice", "")
	if err := member.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
		t.Errorf("shared namespace %s: %v", ns, err)
	}
	waitValue(t, member, ns, "paris", "v1")
	waitEvent(t, "delivery", "ArtifactRemoved", "web-nice")
	if ihs := syncReady(t, "delivery"); len(ihs.Status.Artifacts) != 2 {
		t.Errorf("status lists %d artifacts, want 2", len(ihs.Status.Artifacts))
	}

	// A VidraResource edited by hand is put back as the artifact says.
	vr := &resourcesOf(t, "delivery")[0]
	testfleet.Edit(t, fleet.Hub.Client, vr, func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest = artifact(ns, "paris", "edited") })
	testfleet.Eventually(t, 30*time.Second, "edited VidraResource restored", func() (bool, error) {
		cur := &vidrav1alpha1.VidraResource{}
		err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(vr), cur)
		return err == nil && !strings.Contains(cur.Spec.Manifest, "edited"), err
	})
}

// Deleting an InfrahubSync removes its VidraResources (through their owner references)
// and so its objects.
func TestDeletingTheSyncRemovesWhatItDelivered(t *testing.T) {
	member := fleet.Members[1]
	s := newInfrahub(t, "deleted", infrahubtest.Options{})
	const ns = "ihs-deleted"
	putSites(s, "main", ns, "v1", "paris")
	newSync(t, "deleted", "deleted", s, withCluster(member.Name))
	allReady(t, "deleted", 1)
	waitValue(t, member, ns, "paris", "v1")

	deleteSync(t, "deleted")
	waitValue(t, member, ns, "paris", "")
}

// A VidraResource of the name a sync would use, made by someone else, is never taken
// over: the sync reports it and leaves it alone.
func TestASyncOnlyTouchesItsOwnVidraResources(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	s := newInfrahub(t, "squatted", infrahubtest.Options{})
	const ns = "ihs-squatted"
	putSites(s, "main", ns, "v1", "paris", "lyon")
	newSync(t, "squatted", "squatted", s, withCluster(member.Name))
	vrs := allReady(t, "squatted", 2)

	// Take one name away from the sync: delete it while the sync is suspended, and put a
	// VidraResource of one's own in its place, with the sync's label.
	updateSync(t, "squatted", func(ihs *vidrav1alpha1.InfrahubSync) { ihs.Spec.Suspend = true })
	syncCondition(t, "squatted", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonSuspended)
	taken := vrs[0].Name
	if err := fleet.Hub.Client.Delete(ctx, &vrs[0]); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 30*time.Second, taken+" deleted", func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: taken}, &vidrav1alpha1.VidraResource{})
		return err != nil, client.IgnoreNotFound(err)
	})
	mine := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: taken, Labels: map[string]string{vidrav1alpha1.InfrahubSyncLabel: "squatted"}},
		Spec: vidrav1alpha1.VidraResourceSpec{
			Destination: vidrav1alpha1.Destination{Cluster: member.Name},
			Manifest:    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\n  namespace: default\n",
		},
	}
	if err := fleet.Hub.Client.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(ctx, mine) })

	updateSync(t, "squatted", func(ihs *vidrav1alpha1.InfrahubSync) { ihs.Spec.Suspend = false })
	ihs := syncCondition(t, "squatted", vidrav1alpha1.ConditionReady, metav1.ConditionFalse, vidrav1alpha1.ReasonBundleFailed)
	if !containsAll(readyMessage(ihs), taken, "was not made by this InfrahubSync") {
		t.Errorf("Ready message = %q", readyMessage(ihs))
	}
	got := &vidrav1alpha1.VidraResource{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: taken}, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Spec.Manifest, "name: mine") || len(got.OwnerReferences) != 0 {
		t.Errorf("the sync changed a VidraResource it did not make: %+v", got.Spec)
	}
	deleteSync(t, "squatted")
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: taken}, got); err != nil {
		t.Errorf("the sync's deletion took a VidraResource it did not make: %v", err)
	}
}

// The template's fields reach every VidraResource the sync makes and follow changes of
// the template; syncs that change nothing leave the VidraResources as they are.
func TestTheTemplateShapesTheVidraResources(t *testing.T) {
	s := newInfrahub(t, "templated", infrahubtest.Options{})
	putSites(s, "main", "ihs-templated", "v1", "paris", "lyon")
	newSync(t, "templated", "templated", s, withCluster(fleet.Members[0].Name), func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Spec.Interval = &metav1.Duration{Duration: time.Second}
		ihs.Spec.Template = &vidrav1alpha1.VidraResourceTemplate{
			Labels:        map[string]string{"team": "network", vidrav1alpha1.InfrahubSyncLabel: "not-this-one"},
			AdoptExisting: vidrav1alpha1.AdoptAlways,
			VMRollout:     &vidrav1alpha1.VMRolloutSpec{Strategy: vidrav1alpha1.VMRolloutManual},
		}
	})
	vrs := allReady(t, "templated", 2)
	for _, vr := range vrs {
		if vr.Labels["team"] != "network" || vr.Labels[vidrav1alpha1.InfrahubSyncLabel] != "templated" ||
			vr.Spec.AdoptExisting != vidrav1alpha1.AdoptAlways || vr.Spec.VMRollout == nil || vr.Spec.VMRollout.Strategy != vidrav1alpha1.VMRolloutManual {
			t.Errorf("VidraResource %s: labels %v, spec %+v", vr.Name, vr.Labels, vr.Spec)
		}
	}

	// Several syncs with nothing changed: no spec moves.
	waitGraphQLRequests(t, s, s.GraphQLRequests()+3)
	for _, vr := range resourcesOf(t, "templated") {
		if vr.Generation != 1 {
			t.Errorf("VidraResource %s at generation %d after syncs that changed nothing", vr.Name, vr.Generation)
		}
	}

	// A changed template reaches them.
	updateSync(t, "templated", func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Spec.Template.VMRollout.Strategy = vidrav1alpha1.VMRolloutImmediate
	})
	testfleet.Eventually(t, 30*time.Second, "template change applied", func() (bool, error) {
		for _, vr := range resourcesOf(t, "templated") {
			if vr.Spec.VMRollout == nil || vr.Spec.VMRollout.Strategy != vidrav1alpha1.VMRolloutImmediate {
				return false, nil
			}
		}
		return true, nil
	})
}

// A template's dryRun reaches every VidraResource the sync makes: each previews what it
// would create on its cluster, and nothing lands there.
func TestATemplateDryRunPreviewsAndAppliesNothing(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	s := newInfrahub(t, "dry", infrahubtest.Options{})
	putSites(s, "main", "ihs-dry", "v1", "oslo")
	newSync(t, "dry", "dry", s, withCluster(member.Name), func(ihs *vidrav1alpha1.InfrahubSync) {
		ihs.Spec.Template = &vidrav1alpha1.VidraResourceTemplate{DryRun: true}
	})
	testfleet.Eventually(t, 30*time.Second, "a preview that creates the site's ConfigMap", func() (bool, error) {
		vrs := resourcesOf(t, "dry")
		if len(vrs) != 1 || !vrs[0].Spec.DryRun || vrs[0].Status.Preview == nil {
			return false, nil
		}
		for _, c := range vrs[0].Status.Preview.Changes {
			if c.Kind == "ConfigMap" && c.Name == "web-oslo" && c.Action == vidrav1alpha1.PreviewCreate {
				return true, nil
			}
		}
		return false, nil
	})
	err := member.Client.Get(ctx, client.ObjectKey{Namespace: "ihs-dry", Name: "web-oslo"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the dry run applied web-oslo (get: %v)", err)
	}
}
