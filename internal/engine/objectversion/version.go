// Package objectversion holds which object, at which version, in 32 bytes and no
// allocation of its own: a fleet's caches keep one per managed object, and the UID and
// resourceVersion strings of a decoded object are allocations apart, each pinning a slot
// of a span among the decoding's garbage.
package objectversion

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
)

// Version is an object's UID and resourceVersion: as numbers when they have the forms
// the API server writes (a lower-case UUID, a decimal number), else as the strings
// themselves. A resourceVersion is opaque to clients, so its form is read, never relied
// on: it is given back as it was given. The zero value is no UID and no resourceVersion.
type Version struct {
	id     uuid.UUID
	number uint64
	odd    *odd
}

type odd struct {
	uid             types.UID
	resourceVersion string
}

// Of is the version of the object with this UID at this resourceVersion.
func Of(uid types.UID, resourceVersion string) Version {
	id, idOK := packedUID(string(uid))
	number, numberOK := packedNumber(resourceVersion)
	if idOK && numberOK {
		return Version{id: id, number: number}
	}
	return Version{odd: &odd{uid: uid, resourceVersion: resourceVersion}}
}

// packedUID is s as a UUID when it is one in the form UUID.String writes; the nil UUID
// stands for none.
func packedUID(s string) (uuid.UUID, bool) {
	if s == "" {
		return uuid.Nil, true
	}
	if len(s) != 36 || strings.ToLower(s) != s {
		return uuid.Nil, false
	}
	id, err := uuid.Parse(s)
	return id, err == nil && id != uuid.Nil
}

// packedNumber is s as a number when FormatUint writes it so; 0 stands for none.
func packedNumber(s string) (uint64, bool) {
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || s[0] == '0' {
		return 0, false
	}
	return n, true
}

// UID is the object's UID as it was given.
func (v Version) UID() types.UID {
	switch {
	case v.odd != nil:
		return v.odd.uid
	case v.id == uuid.Nil:
		return ""
	}
	return types.UID(v.id.String())
}

// ResourceVersion is the object's resourceVersion as it was given.
func (v Version) ResourceVersion() string {
	switch {
	case v.odd != nil:
		return v.odd.resourceVersion
	case v.number == 0:
		return ""
	}
	return strconv.FormatUint(v.number, 10)
}

// Equal says whether both are of one object at one resourceVersion.
func (v Version) Equal(o Version) bool {
	if v.odd != nil || o.odd != nil {
		return v.UID() == o.UID() && v.ResourceVersion() == o.ResourceVersion()
	}
	return v.id == o.id && v.number == o.number
}

// HasResourceVersion says whether the version is at resourceVersion, without writing its
// own out: a memo checks one per object it applies.
func (v Version) HasResourceVersion(resourceVersion string) bool {
	if v.odd != nil {
		return v.odd.resourceVersion == resourceVersion
	}
	number, ok := packedNumber(resourceVersion)
	return ok && number == v.number
}
