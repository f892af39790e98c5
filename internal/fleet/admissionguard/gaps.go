package admissionguard

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Gap is a span when the required policies were not all in force, as far as the
// operator can tell. From is zero when it cannot tell when they went: they were gone, or
// had been replaced, when it started. To is zero while they are still not in force.
type Gap struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to,omitzero"`
}

// covers says whether t falls within the gap (an open one reaches now).
func (g Gap) covers(t, now time.Time) bool {
	to := g.To
	if to.IsZero() {
		to = now
	}
	return !t.Before(g.From) && !t.After(to)
}

func (g Gap) String() string {
	from := "a time the operator could not see"
	if !g.From.IsZero() {
		from = g.From.UTC().Format(time.RFC3339)
	}
	if g.To.IsZero() {
		return "from " + from + " until now"
	}
	return fmt.Sprintf("from %s to %s", from, g.To.UTC().Format(time.RFC3339))
}

// gapMargin widens each gap at both ends: the API server and the operator learn of a
// binding's change each through its own watch, at about the same time but not at once.
const gapMargin = 5 * time.Second

// maxGaps bounds the record: beyond it the two oldest gaps become one, which distrusts
// the time between them too (never less than was not in force).
const maxGaps = 32

// gapLog follows the policies' state as one replica sees it. Observed often (at each
// check), it changes only when the state does: an idle hub writes nothing.
type gapLog struct {
	mu sync.Mutex
	// identity is what put the policies in force when last seen (their UIDs and their
	// bindings' UIDs and generations); nil before anything was seen or recorded.
	identity []string
	// seen is when they were last seen in force with identity; zero: not since this
	// replica started, so a change found now may have happened at any earlier time.
	seen time.Time
	gaps []Gap
	// changed is signalled, without blocking, whenever the record changes.
	changed chan struct{}
}

func newGapLog() *gapLog { return &gapLog{changed: make(chan struct{}, 1)} }

// seed starts the log from a stored record, before anything is observed.
func (l *gapLog) seed(identity []string, gaps []Gap) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.identity, l.gaps = identity, gaps
}

// observe notes the policies' state at now: whether all are in force, and what puts
// them in force. A change of identity while in force is a gap too: a binding deleted
// and created again between two looks, or changed and changed back.
func (l *gapLog) observe(inForce bool, identity []string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	open := len(l.gaps) > 0 && l.gaps[len(l.gaps)-1].To.IsZero()
	switch {
	case !inForce && open:
		return
	case !inForce:
		l.add(Gap{From: l.since()})
		l.seen = time.Time{}
		l.signal()
		return
	case open:
		l.gaps[len(l.gaps)-1].To = now.Add(gapMargin)
	case l.identity == nil: // the first state recorded: nothing to compare it with
	case !slices.Equal(l.identity, identity):
		l.add(Gap{From: l.since(), To: now.Add(gapMargin)})
	default:
		l.seen = now
		return
	}
	l.identity, l.seen = identity, now
	l.signal()
}

// since is when a gap found now began, at the latest: just before they were last seen
// in force, or at any time when they have not been since this replica started.
func (l *gapLog) since() time.Time {
	if l.seen.IsZero() {
		return time.Time{}
	}
	return l.seen.Add(-gapMargin)
}

func (l *gapLog) add(g Gap) {
	l.gaps = append(l.gaps, g)
	if len(l.gaps) > maxGaps {
		l.gaps[1].From = l.gaps[0].From
		l.gaps = l.gaps[1:]
	}
}

func (l *gapLog) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// record is a copy of what is to be stored: the identity and the gaps.
func (l *gapLog) record() (identity []string, gaps []Gap) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.identity), slices.Clone(l.gaps)
}

// covering is the gap t falls within, if any.
func (l *gapLog) covering(t, now time.Time) (Gap, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.gaps {
		if g.covers(t, now) {
			return g, true
		}
	}
	return Gap{}, false
}
