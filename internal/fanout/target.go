package fanout

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Target is one destination of an item's VidraResource.
type Target struct {
	// segment names the destination in the VidraResource's name.
	segment string
	// key identifies the destination uniquely, for the name's hash.
	key string
	// destination is the VidraResource's.
	destination vidrav1alpha1.Destination
}

// Destinations are the targets of every item, or nil when each item names its own
// (Destination.ByItem).
func (d *Delivery) Destinations(ctx context.Context) ([]Target, error) {
	dest := d.sync.Destination
	placement := vidrav1alpha1.Destination{Namespace: dest.Namespace, ReconcileOnEvents: dest.ReconcileOnEvents}
	switch {
	case dest.ByItem:
		return nil, nil
	case dest.ClusterSelector != nil:
		selector, err := metav1.LabelSelectorAsSelector(dest.ClusterSelector)
		if err != nil {
			return nil, fmt.Errorf("clusterSelector: %w", err)
		}
		var clusters vidrav1alpha1.VidraClusterList
		if err := d.cfg.Hub.List(ctx, &clusters); err != nil {
			return nil, fmt.Errorf("list VidraClusters: %w", err)
		}
		var targets []Target
		for _, vc := range clusters.Items {
			if vc.DeletionTimestamp.IsZero() && selector.Matches(labels.Set(vc.Labels)) {
				targets = append(targets, clusterTarget(vc.Name, placement))
			}
		}
		return targets, nil
	case dest.Cluster != "":
		return []Target{clusterTarget(dest.Cluster, placement)}, nil
	case dest.Server != "":
		placement.Server = dest.Server
		host := dest.Server
		if u, err := url.Parse(dest.Server); err == nil {
			host = u.Host
		}
		return []Target{{segment: host, key: "server:" + dest.Server, destination: placement}}, nil
	default:
		return []Target{{segment: "local", key: "local:", destination: placement}}, nil
	}
}

// Destination is where the target's VidraResource delivers.
func (t Target) Destination() vidrav1alpha1.Destination { return t.destination }

// Key identifies the target among a sync's destinations.
func (t Target) Key() string { return t.key }

// Name names the target for people: the cluster, the server's host, or "local".
func (t Target) Name() string { return t.segment }

func clusterTarget(cluster string, placement vidrav1alpha1.Destination) Target {
	placement.Cluster = cluster
	return Target{segment: cluster, key: "cluster:" + cluster, destination: placement}
}

// targetsOf are an item's destinations: its own Destination, dests, or with
// Destination.ByItem the cluster its target names; msg says why that target names none.
func (d *Delivery) targetsOf(it Item, dests []Target) (targets []Target, msg string) {
	if it.Destination != nil {
		return []Target{*it.Destination}, ""
	}
	if !d.sync.Destination.ByItem {
		return dests, ""
	}
	cluster := it.Target
	if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
		return nil, fmt.Sprintf("its target's display label %q does not name a cluster: %s", cluster, strings.Join(errs, ", "))
	}
	placement := vidrav1alpha1.Destination{Namespace: d.sync.Destination.Namespace, ReconcileOnEvents: d.sync.Destination.ReconcileOnEvents}
	return []Target{clusterTarget(cluster, placement)}, ""
}
