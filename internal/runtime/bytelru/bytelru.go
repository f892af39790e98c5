// Package bytelru keeps byte slices by key, the most recently used first, within a bound
// of their total size: what is costly to fetch again (stored content, chart archives) and
// cheap to keep while it fits.
package bytelru

import (
	"container/list"
	"sync"
)

// Cache is safe for concurrent use.
type Cache struct {
	mu          sync.Mutex
	limit, size int
	order       *list.List // of *entry, most recent first
	entries     map[string]*list.Element
}

type entry struct {
	key  string
	data []byte
}

// New returns a cache of at most limit bytes.
func New(limit int) *Cache {
	return &Cache{limit: limit, order: list.New(), entries: map[string]*list.Element{}}
}

// Get returns the data kept under key.
func (c *Cache) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry).data, true
}

// Add keeps data unless it alone is over the limit, dropping the least recently used.
func (c *Cache) Add(key string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(data) > c.limit {
		return
	}
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.entries[key] = c.order.PushFront(&entry{key: key, data: data})
	c.size += len(data)
	for c.size > c.limit {
		c.remove(c.order.Back().Value.(*entry).key)
	}
}

// Remove drops what is kept under key.
func (c *Cache) Remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(key)
}

func (c *Cache) remove(key string) {
	e, ok := c.entries[key]
	if !ok {
		return
	}
	c.order.Remove(e)
	delete(c.entries, key)
	c.size -= len(e.Value.(*entry).data)
}
