package intern

import (
	"encoding/binary"
	"slices"
	"sync"
)

// maxMapKey is the longest encoding of a map kept: a map that long rarely repeats.
const maxMapKey = 1024

// Maps holds at most a fixed number of string maps, with their keys and values from a
// Table: the label sets that every VidraResource of a sync carries alike, each decoded
// into a map of its own (a map of one label takes some 300 bytes). A full table forgets
// what it holds and starts again, so sets of syncs long gone do not keep new ones out;
// the maps it gave out stay as they are, shared by those that hold them.
type Maps struct {
	strings *Table
	mu      sync.RWMutex
	maps    map[string]map[string]string
	max     int
}

// NewMaps returns a table that holds at most max maps, their strings from strings.
func NewMaps(max int, strings *Table) *Maps {
	return &Maps{strings: strings, maps: map[string]map[string]string{}, max: max}
}

// Map is the table's copy of a map equal to m, with the table's strings: one all its
// holders share, which none may change, as none changes what a cache holds. A long m
// (longer than maxMapKey encoded) is not held: it is m with the table's values.
func (t *Maps) Map(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	key, ok := encode(m)
	if !ok {
		for k, v := range m { // in place: a map built anew would cost more than it saves
			m[k] = t.strings.String(v)
		}
		return m
	}
	t.mu.RLock()
	held, found := t.maps[string(key)]
	t.mu.RUnlock()
	if found {
		return held
	}
	compact := make(map[string]string, len(m))
	for k, v := range m {
		compact[t.strings.String(k)] = t.strings.String(v)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if held, found := t.maps[string(key)]; found {
		return held
	}
	if len(t.maps) >= t.max {
		clear(t.maps)
	}
	t.maps[string(key)] = compact
	return compact
}

// Len is the number of maps held.
func (t *Maps) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.maps)
}

// encode is m's keys and values in key order, each after its length, so that no two
// maps encode alike; false when that is longer than maxMapKey.
func encode(m map[string]string) ([]byte, bool) {
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 2*binary.MaxVarintLen16
	}
	if size > maxMapKey {
		return nil, false
	}
	slices.Sort(keys)
	key := make([]byte, 0, size)
	for _, k := range keys {
		key = binary.AppendUvarint(key, uint64(len(k)))
		key = append(key, k...)
		key = binary.AppendUvarint(key, uint64(len(m[k])))
		key = append(key, m[k]...)
	}
	return key, true
}
