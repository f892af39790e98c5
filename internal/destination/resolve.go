// Package destination turns a VidraResource's destination into the name of the cluster
// its objects go to: an enrolled cluster by name, an enrolled cluster by server URL
// (compared after normalising, never by substring), or the local cluster.
package destination

import (
	"errors"
	"fmt"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/kubeconfig"
)

// LocalCluster is multicluster-runtime's name for the cluster the operator runs in.
const LocalCluster multicluster.ClusterName = ""

// Errors of Resolve; a VidraResource shows them in a condition.
var (
	ErrLocalClusterDisabled = errors.New("the local cluster is disabled (--disable-local-cluster)")
	ErrNoFleet              = errors.New("this operator runs standalone and manages only its local cluster")
	ErrUnknownServer        = errors.New("no enrolled cluster has this server")
)

// Fleet finds enrolled clusters by server URL.
type Fleet interface {
	ClusterForServer(server string) (multicluster.ClusterName, bool)
}

// Resolver resolves destinations.
type Resolver struct {
	// Fleet is the cluster provider; nil in standalone mode.
	Fleet Fleet
	// DisableLocalCluster refuses destinations that name the local cluster.
	DisableLocalCluster bool
}

var localServer, _ = kubeconfig.NormalizeServer(vidrav1alpha1.LocalClusterServer)

// Resolve returns the cluster a destination names. A cluster given by name is returned
// as is: whether it is enrolled is for the caller to find out from the manager.
func (r Resolver) Resolve(d vidrav1alpha1.Destination) (multicluster.ClusterName, error) {
	switch {
	case d.Cluster != "":
		if r.Fleet == nil {
			return "", fmt.Errorf("cluster %q: %w", d.Cluster, ErrNoFleet)
		}
		return multicluster.ClusterName(d.Cluster), nil
	case d.Server != "":
		server, err := kubeconfig.NormalizeServer(d.Server)
		if err != nil {
			return "", err
		}
		if server == localServer {
			return r.local()
		}
		if r.Fleet == nil {
			return "", fmt.Errorf("server %s: %w", d.Server, ErrNoFleet)
		}
		if name, ok := r.Fleet.ClusterForServer(server); ok {
			return name, nil
		}
		return "", fmt.Errorf("server %s: %w", d.Server, ErrUnknownServer)
	default:
		return r.local()
	}
}

func (r Resolver) local() (multicluster.ClusterName, error) {
	if r.DisableLocalCluster {
		return "", ErrLocalClusterDisabled
	}
	return LocalCluster, nil
}

// LocalClusterLabel is how VidraResource status names the local cluster.
const LocalClusterLabel = vidrav1alpha1.LocalClusterName

// Label is a cluster's name as VidraResource status shows it.
func Label(name multicluster.ClusterName) string {
	if name == LocalCluster {
		return LocalClusterLabel
	}
	return string(name)
}
