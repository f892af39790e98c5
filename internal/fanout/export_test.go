package fanout

// Bounded is bounded, for the tests of what a sync's status may hold.
var Bounded = bounded

// ConcurrentWrites is how many VidraResources a delivery writes at once.
const ConcurrentWrites = concurrentWrites

// Len is how many VidraResources w remembers.
func (w *Written) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.state)
}
