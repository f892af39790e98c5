package bytelru

import "testing"

func TestTheLeastRecentlyUsedGoesFirstAndTheTotalStaysWithinTheLimit(t *testing.T) {
	c := New(10)
	c.Add("a", make([]byte, 4))
	c.Add("b", make([]byte, 4))
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("a is gone before the limit was reached")
	}
	c.Add("c", make([]byte, 4)) // 12 bytes: b, the least recently used, goes
	if _, ok := c.Get("b"); ok {
		t.Error("b is kept past the limit")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s is gone", k)
		}
	}
	c.Add("big", make([]byte, 11)) // over the limit alone: not kept, nothing dropped
	if _, ok := c.Get("big"); ok {
		t.Error("data over the limit is kept")
	}
	if _, ok := c.Get("a"); !ok {
		t.Error("data over the limit pushed a out")
	}
	c.Remove("a")
	if _, ok := c.Get("a"); ok {
		t.Error("a is kept after Remove")
	}
}
