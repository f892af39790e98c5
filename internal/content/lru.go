package content

import "container/list"

// lru keeps the most recently used contents within a bound of total bytes.
type lru struct {
	limit, size int
	order       *list.List // of *entry, most recent first
	entries     map[string]*list.Element
}

type entry struct {
	digest string
	data   []byte
}

func newLRU(limit int) *lru {
	return &lru{limit: limit, order: list.New(), entries: map[string]*list.Element{}}
}

func (c *lru) get(digest string) ([]byte, bool) {
	e, ok := c.entries[digest]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry).data, true
}

// add keeps data unless it alone is over the limit, dropping the least recently used.
func (c *lru) add(digest string, data []byte) {
	if len(data) > c.limit {
		return
	}
	if _, ok := c.entries[digest]; ok {
		c.order.MoveToFront(c.entries[digest])
		return
	}
	c.entries[digest] = c.order.PushFront(&entry{digest: digest, data: data})
	c.size += len(data)
	for c.size > c.limit {
		c.remove(c.order.Back().Value.(*entry).digest)
	}
}

func (c *lru) remove(digest string) {
	e, ok := c.entries[digest]
	if !ok {
		return
	}
	c.order.Remove(e)
	delete(c.entries, digest)
	c.size -= len(e.Value.(*entry).data)
}
