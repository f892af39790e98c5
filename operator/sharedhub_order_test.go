package operator_test

import (
	"context"
	"strings"
	"testing"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// rightBeforeContent is tried as a tenant who may deliver to member 0 only. Before, a
// VidraResource was read and decoded whole, stored content fetched and decompressed,
// before its destination was found or its requester's right to deliver there checked, and
// again every 10 s: one team's bundles naming a cluster that never comes, or one it may
// not deliver to, took the workers every team shares. Now the destination and the right
// come first, so a bundle that cannot go reads nothing: an undecodable one is reported
// for where it goes, not for what it holds. Its spec.preview likewise.
func (h *sharedHub) rightBeforeContent(t *testing.T) {
	ctx := context.Background()
	const undecodable = "kind: ConfigMap\nmetadata: [unclosed\n"
	nowhere := bundle("tenant-nowhere", vidrav1alpha1.Destination{Server: "https://edge-7.example.com:6443", Namespace: "team-a"}, undecodable)
	notThere := bundle("tenant-not-there", vidrav1alpha1.Destination{Server: h.fleet.Members[1].Server(), Namespace: "team-a"}, undecodable)
	notThere.Spec.Preview = &vidrav1alpha1.PendingContent{Revision: "2", Manifest: undecodable}
	for _, vr := range []*vidrav1alpha1.VidraResource{nowhere, notThere} {
		if err := h.tenant.Create(ctx, vr); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, vr)
	}
	h.waitFor(t, nowhere.Name, vidrav1alpha1.ConditionReady, vidrav1alpha1.ReasonClusterNotFound)
	got := h.stalledBecause(t, notThere.Name, "may not deliver to cluster "+h.fleet.Members[1].Name)
	if p := got.Status.Preview; p == nil || !strings.Contains(p.Message, "may not deliver to cluster "+h.fleet.Members[1].Name) {
		t.Errorf("the preview of a bundle that may not go is %+v, want it refused for the right", p)
	}
}
