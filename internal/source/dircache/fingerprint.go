package dircache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Fingerprint is a key part that tells apart the ways a caller reaches a source (its
// credentials, the CA it trusts): a directory fetched with one Secret must not be handed
// to a caller with another, or with none, which the source might have refused. Each part
// is length-prefixed, so no two lists of parts make one fingerprint. It stays in memory:
// a bare hash of a short password is not for status or logs.
func Fingerprint(parts ...[]byte) string {
	h := sha256.New()
	for _, part := range parts {
		_, _ = fmt.Fprintf(h, "%d:", len(part))
		_, _ = h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
