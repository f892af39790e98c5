package fanout

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// MaxItemEvents bounds the Events one delivery records for its items, one each; the
// rest are summed up in one Event per reason (see SummingUp). A sync of a thousand items
// that all change at once (a branch merged in Infrahub, a new chart version for a fleet)
// would
// otherwise cost the hub a thousand writes, a fifth of what delivering them costs.
const MaxItemEvents = 10

// maxFoldedNames bounds the items a summing-up Event names.
const maxFoldedNames = 10

// itemEvents counts the items' Events of one delivery and keeps those past the bound.
type itemEvents struct {
	recorded int
	// folded are the items not recorded one by one, by reason, in delivery order.
	folded map[string][]string
}

// eventDelivered records that item it was delivered, when it is new or its content
// changed. The first VidraResource is the Event's related object, so the Events of
// different items are not folded into one series.
func (d *Delivery) eventDelivered(it Item, prev vidrav1alpha1.BundleStatus, related *vidrav1alpha1.VidraResource, names []string) {
	if related == nil {
		return
	}
	var reason, note string
	switch {
	case prev.ID == "":
		reason = vidrav1alpha1.EventBundleAdded
		note = fmt.Sprintf("%s %s (%s) delivered as %s", d.sync.Noun, it.Name, describe(it), strings.Join(names, ", "))
	case prev.Checksum != it.Checksum:
		reason = vidrav1alpha1.EventBundleUpdated
		note = fmt.Sprintf("%s %s (%s) changed (checksum %s): updated %s", d.sync.Noun, it.Name, describe(it), it.Checksum, strings.Join(names, ", "))
	default:
		return
	}
	if d.itemEvents.recorded < MaxItemEvents {
		d.itemEvents.recorded++
		d.cfg.Events.Record(d.sync.Object, related, corev1.EventTypeNormal, reason, note)
		return
	}
	if d.itemEvents.folded == nil {
		d.itemEvents.folded = map[string][]string{}
	}
	d.itemEvents.folded[reason] = append(d.itemEvents.folded[reason], ItemName(it.Name, it.Target))
}

// recordFoldedEvents records one Event per reason for the items past the bound.
func (d *Delivery) recordFoldedEvents() {
	for _, reason := range []string{vidrav1alpha1.EventBundleAdded, vidrav1alpha1.EventBundleUpdated} {
		items := d.itemEvents.folded[reason]
		if len(items) == 0 {
			continue
		}
		what := "delivered"
		if reason == vidrav1alpha1.EventBundleUpdated {
			what = "changed and updated"
		}
		d.cfg.Events.Record(d.sync.Object, nil, corev1.EventTypeNormal, reason, SummingUp(d.sync.Noun, what, items))
	}
	d.itemEvents = itemEvents{}
}

// describe says which item it is in an Event: its ID, with its target and revision where
// it has them.
func describe(it Item) string {
	out := it.ID
	if it.Target != "" {
		out += ", target " + it.Target
	}
	if it.Revision != "" {
		out += ", revision " + it.Revision
	}
	return out
}

// ItemName names an item in a summing-up Event: its name, with its target if it has one.
func ItemName(name, target string) string {
	if target == "" {
		return name
	}
	return name + " (target " + target + ")"
}

// SummingUp is the note of the Event that sums up the items of one reason past
// MaxItemEvents: how many, and the first of them by name.
func SummingUp(noun, what string, items []string) string {
	shown := items[:min(len(items), maxFoldedNames)]
	note := fmt.Sprintf("%d more %ss %s: %s", len(items), noun, what, strings.Join(shown, ", "))
	if len(items) > len(shown) {
		note += fmt.Sprintf(" and %d others", len(items)-len(shown))
	}
	return note
}
