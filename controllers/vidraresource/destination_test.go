package vidraresource

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
)

// A bundle is applied as its own ServiceAccount where it names one; on the hub, else as
// the local ServiceAccount, never as the operator; on a member, else as the member's
// identity.
func TestApplyAs(t *testing.T) {
	local := types.NamespacedName{Namespace: "vidra-system", Name: "vidra-local"}
	bundle := func(namespace, sa string) *vidrav1alpha1.VidraResource {
		return &vidrav1alpha1.VidraResource{Spec: vidrav1alpha1.VidraResourceSpec{
			Destination: vidrav1alpha1.Destination{Namespace: namespace}, ServiceAccountName: sa,
		}}
	}
	tests := []struct {
		name    string
		localSA types.NamespacedName
		vr      *vidrav1alpha1.VidraResource
		cluster multicluster.ClusterName
		want    string
	}{
		{"hub, the bundle's own account", local, bundle("web", "deployer"), destination.LocalCluster, "system:serviceaccount:web:deployer"},
		{"hub, its own account in default", local, bundle("", "deployer"), destination.LocalCluster, "system:serviceaccount:default:deployer"},
		{"hub, the local account", local, bundle("web", ""), destination.LocalCluster, "system:serviceaccount:vidra-system:vidra-local"},
		{"hub, no account at all", types.NamespacedName{}, bundle("web", ""), destination.LocalCluster, ""},
		{"member, the bundle's own account", local, bundle("web", "deployer"), "edge-1", "system:serviceaccount:web:deployer"},
		{"member, its identity", local, bundle("web", ""), "edge-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Reconciler{LocalServiceAccount: tt.localSA}
			if got := r.applyAs(tt.vr, tt.cluster); got != tt.want {
				t.Errorf("applyAs = %q, want %q", got, tt.want)
			}
		})
	}
}

// A bundle whose cluster is missing looks again soon at first, then less and less often,
// never less than every five minutes.
func TestDestinationBackoff(t *testing.T) {
	for waited, want := range map[time.Duration]time.Duration{
		0:                destinationRetry,
		15 * time.Second: destinationRetry,
		time.Minute:      30 * time.Second,
		4 * time.Minute:  2 * time.Minute,
		time.Hour:        maxDestinationRetry,
	} {
		if got := destinationBackoff(waited); got != want {
			t.Errorf("after %s: %s, want %s", waited, got, want)
		}
	}
}
