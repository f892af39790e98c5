package fanout

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// resourceName is the name of the VidraResource that delivers one item of one sync to
// one destination: readable (the sync's name, then segment, naming the destination) and
// unique, because a hash of the sync, the destination's key and the item ends it. An
// item's ID may be the same in two syncs (Infrahub keeps a node's ID across branches), so
// the sync's name is what keeps them apart.
func resourceName(sync, segment, key, itemID string) string {
	sum := sha256.Sum256([]byte(sync + "\x00" + key + "\x00" + itemID))
	hash := hex.EncodeToString(sum[:])[:hashLength]
	prefix := dnsLabel(sync + "-" + segment)
	if len(prefix) > maxNameLength-hashLength-1 {
		prefix = strings.TrimRight(prefix[:maxNameLength-hashLength-1], "-")
	}
	if prefix == "" {
		return hash
	}
	return prefix + "-" + hash
}

// resourceName is the name of the item's VidraResource on target t.
func (it Item) resourceName(sync string, t Target) string {
	return resourceName(sync, t.segment, t.key, cmp.Or(it.ResourceID, it.ID))
}

const (
	// maxNameLength keeps names usable as label values (the VM rollout labels by it).
	maxNameLength = 63
	hashLength    = 10
)

// dnsLabel lowercases s and turns every run of characters a DNS label cannot hold into
// one dash.
func dnsLabel(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}
