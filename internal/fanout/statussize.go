package fanout

import (
	"fmt"

	"github.com/vidra-operator/vidra/internal/bytesize"
	"github.com/vidra-operator/vidra/internal/hubobject"
)

// statusLimit is how much of an object on the hub a sync's item statuses may take; the rest is for its
// spec, metadata, conditions and last error (32 KiB of message each at most) and rollout.
const statusLimit = hubobject.Limit - 256<<10

// Bytes an item's status takes beyond its values: its JSON keys; the managed-fields entry
// that records the operator wrote it (its fields, keyed by the item's ID); its checksum
// again in the status's list of checksums; and a message, which few carry, of
// messageAllowance bytes.
var (
	itemOverhead = len(`{"id":"","name":"","target":"","definition":"","checksum":"","digest":"","stableChecksum":"",`+
		`"stableDigest":"","builtFrom":"","message":"","vidraResources":[]},`) +
		len(`"k:{\"id\":\"\"}":{".":{},"f:builtFrom":{},"f:checksum":{},"f:definition":{},"f:digest":{},"f:id":{},`+
			`"f:message":{},"f:name":{},"f:stableChecksum":{},"f:stableDigest":{},"f:target":{},"f:vidraResources":{}},`) +
		len(`"",`) + messageAllowance
	// digestLength is a content store digest's: "sha256:" and 64 hex digits.
	digestLength = len("sha256:") + 64
)

const messageAllowance = 128

// StatusTooLarge says why the statuses of items delivered to dests would not fit in the
// sync on the hub, or "" when they do. It is asked before anything is delivered: a
// status the API server refuses would leave the sync retrying without end, what it
// delivered unrecorded (the stable content a rollback returns to, the digests the
// content store keeps).
func (d *Delivery) StatusTooLarge(items []Item, dests []Target) string {
	progressive := Progressive(d.sync.Object.RolloutSpec())
	size, resources := 0, 0
	for _, it := range items {
		size += itemOverhead + 2*len(it.ID) + len(it.Name) + len(it.Target) + len(it.Definition) + 3*len(it.Checksum) + len(it.BuiltFrom)
		if it.Digest != "" || progressive {
			size += 2 * digestLength // its digest and its stable digest
		}
		targets, _ := d.targetsOf(it, dests)
		resources += len(targets)
		for _, t := range targets {
			size += len(resourceName(d.sync.Object.GetName(), t.segment, t.key, it.ID)) + len(`"",`)
		}
	}
	if size <= statusLimit {
		return ""
	}
	return fmt.Sprintf("the status of %d %ss delivered as %d VidraResources would take about %s, more than the %s a sync's status may give its %ss "+
		"(an object on the hub holds at most %s): nothing was delivered or removed; split the sync, or select fewer clusters",
		len(items), d.sync.Noun, resources, bytesize.Format(int64(size)), bytesize.Format(statusLimit), d.sync.Noun, bytesize.Format(hubobject.Limit))
}
