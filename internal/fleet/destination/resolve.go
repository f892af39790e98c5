// Package destination turns a VidraResource's destination into the name of the cluster
// its objects go to: an enrolled cluster by name, an enrolled cluster by server URL
// (compared after normalising, never by substring), or the local cluster.
package destination

import (
	"errors"
	"fmt"
	"net/url"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
)

// LocalCluster is multicluster-runtime's name for the cluster the operator runs in.
const LocalCluster multicluster.ClusterName = ""

// Errors of Resolve; a VidraResource shows them in a condition.
var (
	ErrLocalClusterDisabled = errors.New("the local cluster is disabled (--disable-local-cluster)")
	ErrNoFleet              = errors.New("this operator runs standalone and manages only its local cluster")
	ErrUnknownServer        = errors.New("no enrolled cluster has this server")
	ErrLocalSpelling        = errors.New("the hub's own server is spelled https://kubernetes.default.svc (port 443 and a trailing / allowed): give that, or no server at all")
)

// NamesHub says whether a destination's server URL names the hub, as the chart's
// admission policy reads it: none, or https://kubernetes.default.svc plainly spelled.
func NamesHub(server string) bool {
	return server == "" || plainLocalSpelling(server)
}

// plainLocalSpelling says whether a server URL names the hub as the chart's admission
// policy recognises it: scheme https and host kubernetes.default.svc in any ASCII case,
// port 443 or none, path / or none, nothing else. Normalising is more lenient (it trims
// spaces and slashes, and folds Unicode case), so a spelling only it accepts is refused.
func plainLocalSpelling(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	port := u.Port()
	return asciiLower(u.Scheme) == "https" && asciiLower(u.Hostname()) == "kubernetes.default.svc" &&
		(port == "" || port == "443") && (u.EscapedPath() == "" || u.EscapedPath() == "/")
}

// asciiLower lowers ASCII letters only, as CEL's lowerAscii does: Unicode case folding
// would take the Kelvin sign for a k.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

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
			if !plainLocalSpelling(d.Server) {
				// Admission names the hub only in these spellings: any other would go to the
				// hub unchecked.
				return "", fmt.Errorf("server %q: %w", d.Server, ErrLocalSpelling)
			}
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
