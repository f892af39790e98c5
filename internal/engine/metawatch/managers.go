package metawatch

import (
	"encoding/binary"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// encodeManagers encodes managed-fields entries as one string, so that the records of a
// bundle's objects share them interned: per entry its manager, operation, API version
// and subresource, each after its length, its time in Unix seconds (0 for none), and its
// fields after a flag saying whether it has any. The fields are kept as the watch's
// transform left them (Vidra's trim makes them one of two short values).
func encodeManagers(entries []metav1.ManagedFieldsEntry) string {
	var b []byte
	for _, e := range entries {
		for _, s := range []string{e.Manager, string(e.Operation), e.APIVersion, e.Subresource} {
			b = appendString(b, s)
		}
		var at int64
		if e.Time != nil {
			at = e.Time.Unix()
		}
		b = binary.AppendVarint(b, at)
		if e.FieldsV1 == nil {
			b = append(b, 0)
			continue
		}
		b = appendString(append(b, 1), e.FieldsV1.GetRawString())
	}
	return string(b)
}

// decodeManagers is the entries encodeManagers encoded; nil for none.
func decodeManagers(s string) []metav1.ManagedFieldsEntry {
	if s == "" {
		return nil
	}
	str := func() (v string) {
		v, s = cutString(s)
		return v
	}
	var out []metav1.ManagedFieldsEntry
	for s != "" {
		e := metav1.ManagedFieldsEntry{
			Manager: str(), Operation: metav1.ManagedFieldsOperationType(str()), APIVersion: str(), Subresource: str(),
		}
		at, size := binary.Varint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
		s = s[size:]
		if at != 0 {
			t := metav1.NewTime(time.Unix(at, 0))
			e.Time = &t
		}
		hasFields := s[0] == 1
		s = s[1:]
		if hasFields {
			e.FieldsType, e.FieldsV1 = "FieldsV1", metav1.NewFieldsV1(str())
		}
		out = append(out, e)
	}
	return out
}
