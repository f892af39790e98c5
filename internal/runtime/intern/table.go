// Package intern keeps one copy of the short strings that repeat across many cached
// objects: the kinds, API versions, namespaces, names and states that a fleet's
// VidraResources share, each decoded into a string of its own.
package intern

import "sync"

// maxLen is the longest string kept: longer ones (messages, digests) rarely repeat.
const maxLen = 64

// Table holds at most a fixed number of strings, the first met; past that, a string not
// held is returned as it is. The bound keeps a table of a long-running process from
// growing with names of objects long gone.
type Table struct {
	mu      sync.RWMutex
	strings map[string]string
	max     int
}

// NewTable returns a table that holds at most max strings.
func NewTable(max int) *Table {
	return &Table{strings: map[string]string{}, max: max}
}

// String is the table's copy of s, or s when the table does not hold it and is full.
func (t *Table) String(s string) string {
	if s == "" || len(s) > maxLen {
		return s
	}
	t.mu.RLock()
	held, ok := t.strings[s]
	t.mu.RUnlock()
	if ok {
		return held
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if held, ok := t.strings[s]; ok {
		return held
	}
	if len(t.strings) >= t.max {
		return s
	}
	t.strings[s] = s
	return s
}

// Len is the number of strings held.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.strings)
}
