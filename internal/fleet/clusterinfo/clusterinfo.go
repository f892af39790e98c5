// Package clusterinfo reads what a fleet's cluster is, as a chart rendered for it must
// see it: its Kubernetes version and the API versions and kinds it serves, through
// discovery on the connection the operator already has, kept for a short while so that
// many syncs rendering for one cluster ask it once.
package clusterinfo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
)

// Info is what a cluster is.
type Info struct {
	// Name is the cluster's name in the fleet ("local" for the cluster the operator runs in).
	Name string
	// KubeVersion is its version, such as v1.36.0.
	KubeVersion string
	// APIVersions are the group versions it serves ("v1", "apps/v1") and each kind in
	// them ("apps/v1/Deployment"), sorted.
	APIVersions []string
}

// Clusters gives the operator's connection to a cluster of the fleet.
type Clusters interface {
	GetCluster(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error)
}

// Reader reads clusters' Info; safe for concurrent use.
type Reader struct {
	Clusters Clusters
	Resolver destination.Resolver
	// MaxAge is how long an Info is used before the cluster is asked again (default 30s):
	// an API a bundle just brought shows up within it.
	MaxAge time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Reports, when set, reads what pull clusters' agents reported of their members, in
	// each cluster's namespace on the hub.
	Reports client.Reader

	mu    sync.Mutex
	known map[multicluster.ClusterName]*entry
}

type entry struct {
	mu   sync.Mutex
	info Info
	at   time.Time
}

const defaultMaxAge = 30 * time.Second

// Read returns the Info of the cluster dest names.
func (r *Reader) Read(ctx context.Context, dest vidrav1alpha1.Destination) (Info, error) {
	name, err := r.Resolver.Resolve(dest)
	if err != nil {
		return Info{}, err
	}
	e := r.entry(name)
	e.mu.Lock() // one discovery per cluster at a time: the others wait for its answer
	defer e.mu.Unlock()
	now := r.now()
	if !e.at.IsZero() && now.Sub(e.at) < cmp.Or(r.MaxAge, defaultMaxAge) {
		return e.info, nil
	}
	info, partial, err := r.discover(ctx, name)
	switch {
	case err != nil:
		return Info{}, err
	case partial && !e.at.IsZero():
		// A group whose aggregated API server is down for a while is not an API the
		// cluster stopped serving: what was known stays, rather than render again
		// without it.
		e.at = now
		return e.info, nil
	}
	e.info, e.at = info, now
	return info, nil
}

// Forget drops what is known of a cluster, so that its next Read asks it.
func (r *Reader) Forget(name multicluster.ClusterName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.known, name)
}

func (r *Reader) entry(name multicluster.ClusterName) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.known == nil {
		r.known = map[multicluster.ClusterName]*entry{}
	}
	e := r.known[name]
	if e == nil {
		e = &entry{}
		r.known[name] = e
	}
	return e
}

// discover asks the cluster; partial says a group could not be listed and is left out.
func (r *Reader) discover(ctx context.Context, name multicluster.ClusterName) (info Info, partial bool, err error) {
	label := destination.Label(name)
	cl, err := r.Clusters.GetCluster(ctx, name)
	if err != nil {
		if errors.Is(err, multicluster.ErrClusterNotFound) && r.Reports != nil {
			// A pull cluster is never engaged: its agent reports what it is.
			if info, ok, err := r.reported(ctx, name); ok || err != nil {
				return info, false, err
			}
		}
		if errors.Is(err, multicluster.ErrClusterNotFound) {
			return Info{}, false, fmt.Errorf("cluster %q is not engaged", label)
		}
		return Info{}, false, fmt.Errorf("cluster %q: %w", label, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cl.GetConfig(), cl.GetHTTPClient())
	if err != nil {
		return Info{}, false, fmt.Errorf("discovery of cluster %q: %w", label, err)
	}
	info, partial, err = Discover(dc)
	if err != nil {
		return Info{}, false, fmt.Errorf("cluster %q: %w", label, err)
	}
	info.Name = label
	return info, partial, nil
}

// Discover asks a cluster's discovery what it is; partial says a group could not be
// listed and is left out, as kubectl leaves out a group whose aggregated API server is
// down.
func Discover(dc discovery.DiscoveryInterface) (info Info, partial bool, err error) {
	version, err := dc.ServerVersion()
	if err != nil {
		return Info{}, false, fmt.Errorf("version: %w", err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return Info{}, false, fmt.Errorf("APIs: %w", err)
	}
	return Info{KubeVersion: version.GitVersion, APIVersions: apiVersions(lists)}, err != nil, nil
}

// apiVersions lists every group version and every kind in it, as Helm's capabilities do.
func apiVersions(lists []*metav1.APIResourceList) []string {
	seen := map[string]bool{}
	for _, l := range lists {
		seen[l.GroupVersion] = true
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") {
				continue // a subresource
			}
			seen[l.GroupVersion+"/"+res.Kind] = true
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func (r *Reader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Bounds of what an agent reports: it is no more trusted than its member.
const (
	maxReportedAPIs   = 20000
	maxReportedLength = 316 // group (253) / version (63)
)

// reported is what the agent of pull cluster name last reported; ok is false when the
// cluster is no pull cluster.
func (r *Reader) reported(ctx context.Context, name multicluster.ClusterName) (Info, bool, error) {
	label := destination.Label(name)
	vc := &vidrav1alpha1.VidraCluster{}
	if err := r.Reports.Get(ctx, client.ObjectKey{Name: string(name)}, vc); err != nil || vc.Status.Mode != vidrav1alpha1.ClusterModePull {
		return Info{}, false, nil //nolint:nilerr // not a pull cluster that can be told
	}
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: pull.Namespace(string(name)), Name: pull.CapabilitiesName}
	if err := r.Reports.Get(ctx, key, cm); err != nil {
		return Info{}, true, fmt.Errorf("what pull cluster %q serves, as its agent reports it in %s: %w", label, key, err)
	}
	info := Info{Name: label, KubeVersion: cm.Data[pull.KubeVersionKey]}
	for _, v := range strings.Split(cm.Data[pull.APIVersionsKey], "\n") {
		if v = strings.TrimSpace(v); v != "" && len(v) <= maxReportedLength && len(info.APIVersions) < maxReportedAPIs {
			info.APIVersions = append(info.APIVersions, v)
		}
	}
	if info.KubeVersion == "" || len(info.APIVersions) == 0 {
		return Info{}, true, fmt.Errorf("the agent of pull cluster %q has not reported what it serves yet (%s)", label, key)
	}
	if _, err := version.ParseGeneric(info.KubeVersion); err != nil || len(info.KubeVersion) > 64 {
		return Info{}, true, fmt.Errorf("the agent of pull cluster %q reports a Kubernetes version that is none (%s)", label, key)
	}
	slices.Sort(info.APIVersions)
	return info, true, nil
}
