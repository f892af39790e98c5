package fanout

import vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"

// Placed is an item on one of its targets, and the VidraResource the sync has there
// (nil when it has none yet).
type Placed struct {
	Item     Item
	Cluster  string
	Resource *vidrav1alpha1.VidraResource
}

// Placements are where items would go among dests, as Deliver would place them, with
// the VidraResources the sync has there: what a preview dry-runs against. Nothing is
// written.
func (d *Delivery) Placements(items []Item, dests []Target) []Placed {
	var out []Placed
	for _, it := range items {
		if it.Unready != "" {
			continue
		}
		targets, _ := d.targetsOf(it, dests)
		for _, t := range targets {
			out = append(out, Placed{Item: it, Cluster: t.segment, Resource: d.owned[it.resourceName(d.sync.Object.GetName(), t)]})
		}
	}
	return out
}
