package metawatch

import (
	"encoding/binary"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The labels and annotations a record keeps are one string, interned: each pair a tag
// (label or annotation), then its key and its value, each after its length. Annotation
// values may hold any byte, so nothing is a separator.
const (
	labelTag      = 'l'
	annotationTag = 'a'
)

// encodeKept encodes the labels and annotations of obj that keep names, in keep's order.
func encodeKept(obj *metav1.PartialObjectMetadata, keep Keep) string {
	var b []byte
	add := func(tag byte, from map[string]string, keys []string) {
		for _, k := range keys {
			if v, ok := from[k]; ok {
				b = append(b, tag)
				b = appendString(b, k)
				b = appendString(b, v)
			}
		}
	}
	add(labelTag, obj.Labels, keep.Labels)
	add(annotationTag, obj.Annotations, keep.Annotations)
	return string(b)
}

// eachKept calls do with each pair encodeKept encoded, until do returns false.
func eachKept(s string, do func(tag byte, key, value string) bool) {
	for s != "" {
		tag := s[0]
		var key, value string
		key, s = cutString(s[1:])
		value, s = cutString(s)
		if !do(tag, key, value) {
			return
		}
	}
}

// decodeKept is the labels and annotations encodeKept encoded; nil for none.
func decodeKept(s string) (labels, annotations map[string]string) {
	eachKept(s, func(tag byte, key, value string) bool {
		into := &annotations
		if tag == labelTag {
			into = &labels
		}
		if *into == nil {
			*into = map[string]string{}
		}
		(*into)[key] = value
		return true
	})
	return labels, annotations
}

// keptLabel is the value of the label key among those encodeKept encoded.
func keptLabel(s, key string) (value string, found bool) {
	eachKept(s, func(tag byte, k, v string) bool {
		if tag == labelTag && k == key {
			value, found = v, true
		}
		return !found
	})
	return value, found
}

// appendString appends s after its length, as the encodings of a record keep strings.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// cutString is the string appendString wrote at the start of s, and the rest of s.
func cutString(s string) (value, rest string) {
	n, size := uvarint(s)
	return s[size : size+n], s[size+n:]
}

// uvarint reads what binary.AppendUvarint wrote at the start of s, and its size; as
// binary.Uvarint does, without copying s into a byte slice.
func uvarint(s string) (n, size int) {
	var shift uint
	for i := range len(s) {
		c := s[i]
		n |= int(c&0x7f) << shift
		if c < 0x80 {
			return n, i + 1
		}
		shift += 7
	}
	return 0, len(s)
}
