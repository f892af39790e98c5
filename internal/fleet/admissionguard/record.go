package admissionguard

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// The managed fields that record who asked: the spec (the requester policy stamps every
// change of it) and the stamp itself (written by people where that policy is not served).
const (
	specField  = `"f:spec"`
	stampField = `"f:` + vidrav1alpha1.RequestedByAnnotation
)

// WrittenAt is when the record of who asked for obj was last written: the latest time of
// an entry of its managed fields, on the object itself (not its status), that holds a
// field of its spec or of its stamp. Zero when none says: it counts as written at any
// time.
func WrittenAt(obj metav1.Object) time.Time {
	var at time.Time
	for _, e := range obj.GetManagedFields() {
		if e.Subresource != "" || e.Time == nil {
			continue
		}
		// An entry without fields is one KeepWrittenAt made.
		if fields := e.FieldsV1.GetRawString(); e.FieldsV1 != nil && !strings.Contains(fields, specField) && !strings.Contains(fields, stampField) {
			continue
		}
		if e.Time.After(at) {
			at = e.Time.Time
		}
	}
	return at
}

// KeepWrittenAt replaces obj's managed fields by one entry that holds only WrittenAt:
// for a cache, which keeps no managed fields otherwise.
func KeepWrittenAt(obj metav1.Object) {
	at := WrittenAt(obj)
	if at.IsZero() {
		obj.SetManagedFields(nil)
		return
	}
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: at}}})
}

// RecordRefusal says why what obj records of who asked for it is not to be trusted: it
// was last written while the policy that records who asks was not in force, so nothing
// recorded who wrote it (or checked its stamp). Empty when it may be trusted, or c is
// nil. Once the policy is back, only a new change of its spec (which admission checks
// and stamps), or the object written anew, is trusted again. It reads the gaps the last
// Refusal or Missing saw (none before the first).
func (c *Checker) RecordRefusal(obj metav1.Object, what string) string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	log := c.logLocked()
	c.mu.Unlock()
	at := WrittenAt(obj)
	gap, found := log.covering(at, time.Now())
	if !found {
		return ""
	}
	when := "at a time its managed fields do not tell"
	if !at.IsZero() {
		when = "at " + at.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s was last written %s, while the hub's admission policy that records who asks was not in force (%s), "+
		"so who wrote it, and whether they may, cannot be told: change its spec, or create it again, to have admission check and record it",
		what, when, gap)
}
