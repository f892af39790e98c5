package destination

import (
	"errors"
	"testing"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
)

// servers is a fleet keyed by normalised server, as the cluster provider keeps it.
type servers map[string]multicluster.ClusterName

func (s servers) ClusterForServer(server string) (multicluster.ClusterName, bool) {
	n, err := kubeconfig.NormalizeServer(server)
	if err != nil {
		return "", false
	}
	name, ok := s[n]
	return name, ok
}

func TestResolve(t *testing.T) {
	fleet := servers{"https://edge.example.com:6443": "edge-1"}
	tests := []struct {
		name     string
		resolver Resolver
		dest     vidrav1alpha1.Destination
		want     multicluster.ClusterName
		wantErr  error
	}{
		{"empty is local", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{}, LocalCluster, nil},
		{"kubernetes.default.svc is local", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Server: "https://kubernetes.default.svc/"}, LocalCluster, nil},
		{"local disabled", Resolver{Fleet: fleet, DisableLocalCluster: true}, vidrav1alpha1.Destination{}, "", ErrLocalClusterDisabled},
		{"the hub's server in capitals, with its port", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Server: "HTTPS://Kubernetes.Default.SVC:443"}, LocalCluster, nil},
		{"the hub's server with two slashes", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Server: "https://kubernetes.default.svc//"}, "", ErrLocalSpelling},
		{"the hub's server with a trailing space", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Server: "https://kubernetes.default.svc/ "}, "", ErrLocalSpelling},
		{"the hub's server with a Kelvin sign", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Server: "https://\u212Aubernetes.default.svc"}, "", ErrLocalSpelling},
		{"by name", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Cluster: "edge-1"}, "edge-1", nil},
		{"by server, other spelling", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Server: "HTTPS://Edge.example.com:6443/"}, "edge-1", nil},
		{"server containing an enrolled host", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Server: "https://edge.example.com.evil.net:6443"}, "", ErrUnknownServer},
		{"server on another port", Resolver{Fleet: fleet}, vidrav1alpha1.Destination{Server: "https://edge.example.com:64430"}, "", ErrUnknownServer},
		{"standalone by name", Resolver{}, vidrav1alpha1.Destination{Cluster: "edge-1"}, "", ErrNoFleet},
		{"standalone local", Resolver{}, vidrav1alpha1.Destination{Namespace: "apps"}, LocalCluster, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.resolver.Resolve(tt.dest)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("Resolve = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
