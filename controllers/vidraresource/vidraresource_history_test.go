package vidraresource_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// Each delivered content is a revision, numbered in order; historyLimit bounds how many
// are kept; a revision records how it ended; the revisions go with the VidraResource.
func TestRevisionHistoryIsKeptWithinItsLimit(t *testing.T) {
	ctx := context.Background()
	m := fleet.Members[0]
	bundle := func(v string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: versioned}\ndata: {value: %q}\n", v)
	}
	deliver(t, "history", vidrav1alpha1.Destination{Cluster: m.Name, Namespace: "history-ns"}, bundle("1"),
		func(vr *vidrav1alpha1.VidraResource) { vr.Spec.HistoryLimit = ptr.To[int32](2) })
	vr := ready(t, "history")
	for _, v := range []string{"2", "3"} {
		updateSpec(t, "history", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest = bundle(v) })
		vr = ready(t, "history")
	}
	if vr.Status.Revision != 3 {
		t.Fatalf("status.revision %d, want 3", vr.Status.Revision)
	}
	h := &history.History{Client: fleet.Hub.Client, Reader: fleet.Hub.Client, Namespace: testoperator.Namespace}
	revisions, err := h.List(ctx, vr)
	if err != nil {
		t.Fatal(err)
	}
	if len(revisions) != 2 || revisions[0].Number != 2 || revisions[1].Number != 3 {
		t.Fatalf("revisions %+v, want 2 and 3 (historyLimit 2)", revisions)
	}
	// Its manifest is in the content store (Secrets), named by digest: never readable
	// by those who may read ControllerRevisions.
	if r := revisions[0]; r.Result != "Ready" || r.Source != "user" || r.Body.Manifest != "" ||
		r.Body.Content == nil || r.Body.Content.Digest != content.Digest([]byte(bundle("2"))) {
		t.Errorf("revision 2: %+v", r)
	}
	// Owned by the VidraResource, so the garbage collector takes them with it whatever
	// happens to the operator.
	var crs appsv1.ControllerRevisionList
	if err := fleet.Hub.Client.List(ctx, &crs, client.InNamespace(testoperator.Namespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(vr.UID)}); err != nil {
		t.Fatal(err)
	}
	for _, cr := range crs.Items {
		if owner := metav1.GetControllerOf(&cr); owner == nil || owner.UID != vr.UID || owner.Kind != "VidraResource" {
			t.Errorf("revision %s is controlled by %+v, want VidraResource history", cr.Name, owner)
		}
	}

	remove(t, "history")
	testfleet.Eventually(t, 30*time.Second, "the revisions deleted with the VidraResource", func() (bool, error) {
		var list appsv1.ControllerRevisionList
		err := fleet.Hub.Client.List(ctx, &list, client.InNamespace(testoperator.Namespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(vr.UID)})
		return err == nil && len(list.Items) == 0, err
	})
}
