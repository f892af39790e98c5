package fanout

import (
	"encoding/json"
	"fmt"
	"strconv"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/bytesize"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
	"github.com/vidra-operator/vidra/internal/runtime/hubobject"
)

// A sync's status must fit in an object on the hub, whatever the fleet's size and however
// many clusters fail: each item names at most ListedResources VidraResources, and the
// items' messages together take at most messageBudget.
const (
	// ListedResources is how many of an item's VidraResources its status names; its
	// count says how many there are.
	ListedResources = 10
	// maxItemMessage bounds one item's message; the sync's Ready condition and Events
	// hold what it is cut from.
	maxItemMessage = 512
	// messageBudget is what the items' messages may take together; past it, an item's
	// message is cutMessage.
	messageBudget = 64 << 10
	cutMessage    = "cut: see the sync's conditions and Events"
	// statusLimit is how much of an object on the hub a sync's item statuses may take; the
	// rest is for its spec, metadata, conditions and last error (32 KiB of message each
	// at most) and rollout.
	statusLimit = hubobject.Limit - 256<<10
)

// bounded is statuses with at most ListedResources VidraResources named by each, and
// counted; and with messages cut to maxItemMessage, and to cutMessage past messageBudget.
func bounded(statuses []vidrav1alpha1.BundleStatus) []vidrav1alpha1.BundleStatus {
	spent := 0
	for i := range statuses {
		st := &statuses[i]
		if n := int32(len(st.VidraResources)); n > ListedResources || st.VidraResourceCount == 0 {
			st.VidraResourceCount = n
		}
		if len(st.VidraResources) > ListedResources {
			st.VidraResources = st.VidraResources[:ListedResources:ListedResources]
		}
		if st.Message == "" {
			continue
		}
		st.Message = conditions.Cut(st.Message, maxItemMessage, " … (cut)")
		if spent+len(st.Message) > messageBudget {
			st.Message = cutMessage
		}
		spent += len(st.Message)
	}
	return statuses
}

// keyed is the JSON an item's status takes for a key with a value, and its managed-fields
// entry: `"key":value,` and `"f:key":{},`.
func keyed(key string, value int) int {
	return len(`"":,`) + len(key) + value + len(`"f:":{},`) + len(key)
}

// quoted is a string's JSON length, escapes included: an item's name and target come from
// the source, and each `<`, `>`, `&` or quote in them takes more than its byte.
func quoted(s string) int {
	encoded, err := json.Marshal(s)
	if err != nil { // a string always encodes; count the worst escape were it not to
		return 6*len(s) + 2
	}
	return len(encoded)
}

// digestLength is a content store digest's: "sha256:" and 64 hex digits.
var digestLength = quoted("sha256:") + 64

// itemStatusSize is about what item it's status takes in the sync on the hub once
// delivered to resources: its keys with values and their managed-fields entry, keyed by
// its ID; its checksum again in the status's list of checksums; and the shortest message
// (the budget is counted once for the longer ones).
func itemStatusSize(it Item, stored bool, listed []string, resources int) int {
	size := len(`{},`) + len(`"k:{\"id\":\"\"}":{".":{}},`) + len(it.ID) + keyed("id", quoted(it.ID)) + quoted(it.Checksum)
	for _, field := range [...]struct{ key, value string }{{"name", it.Name}, {"target", it.Target}, {"revision", it.Revision}, {"definition", it.Definition},
		{"checksum", it.Checksum}, {"stableChecksum", it.Checksum}, {"builtFrom", it.BuiltFrom}} {
		if field.value != "" {
			size += keyed(field.key, quoted(field.value))
		}
	}
	if stored {
		size += keyed("digest", digestLength) + keyed("stableDigest", digestLength)
	}
	if resources > 0 {
		names := len(`[]`)
		for _, name := range listed {
			names += quoted(name) + len(`,`)
		}
		size += keyed("vidraResources", names) + keyed("vidraResourceCount", len(strconv.Itoa(resources)))
	}
	return size + keyed("message", quoted(cutMessage))
}

// StatusTooLarge says why the statuses of items delivered to dests would not fit in the
// sync on the hub, or "" when they do. It is asked before anything is delivered: a
// status the API server refuses would leave the sync retrying without end, what it
// delivered unrecorded (the stable content a rollback returns to, the digests the
// content store keeps).
func (d *Delivery) StatusTooLarge(items []Item, dests []Target) string {
	progressive := Progressive(d.sync.Object.RolloutSpec())
	size, resources := messageBudget, 0
	for _, it := range items {
		targets, _ := d.targetsOf(it, dests)
		names := make([]string, 0, min(len(targets), ListedResources))
		for _, t := range targets[:min(len(targets), ListedResources)] {
			names = append(names, it.resourceName(d.sync.Object.GetName(), t))
		}
		resources += len(targets)
		size += itemStatusSize(it, it.Digest != "" || progressive, names, len(targets))
	}
	if size <= statusLimit {
		return ""
	}
	return fmt.Sprintf("the status of %d %ss delivered as %d VidraResources would take about %s, more than the %s a sync's status may give its %ss "+
		"(an object on the hub holds at most %s): nothing was delivered or removed; split the sync into syncs of fewer %ss",
		len(items), d.sync.Noun, resources, bytesize.Format(int64(size)), bytesize.Format(statusLimit), d.sync.Noun, bytesize.Format(hubobject.Limit), d.sync.Noun)
}
