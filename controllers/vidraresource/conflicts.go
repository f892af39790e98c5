package vidraresource

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vidra-operator/vidra/internal/engine/apply"
)

// conflictBook remembers, for each VidraResource whose field value is in effect, which
// other VidraResources were refused that field, so both sides report the conflict. The
// refused side writes its entries on every reconcile; they are rebuilt after a restart the
// same way.
type conflictBook struct {
	mu sync.Mutex
	// byHolder[holder][refused] lists "object: field" entries.
	byHolder map[string]map[string][]string
}

func newConflictBook() *conflictBook {
	return &conflictBook{byHolder: map[string]map[string][]string{}}
}

// record replaces what refused was refused, and returns the holders whose view changed
// (only those: two VidraResources refusing each other a field must not requeue each
// other forever).
func (b *conflictBook) record(refused, hubID string, results []apply.Result) []string {
	fresh := map[string][]string{}
	prefix := apply.FieldManagerPrefix + hubID + "/"
	for _, res := range results {
		if res.Action != apply.Conflicted {
			continue
		}
		for _, c := range res.Conflicts {
			if holder, ok := strings.CutPrefix(c.Manager, prefix); ok && hubID != "" {
				fresh[holder] = append(fresh[holder], fmt.Sprintf("%s %s", res.Ref, c.Field))
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var changed []string
	for holder, entries := range b.byHolder {
		if _, still := fresh[holder]; !still {
			if _, had := entries[refused]; had {
				delete(entries, refused)
				changed = append(changed, holder)
			}
		}
	}
	for holder, entries := range fresh {
		if b.byHolder[holder] == nil {
			b.byHolder[holder] = map[string][]string{}
		}
		if !slices.Equal(b.byHolder[holder][refused], entries) {
			b.byHolder[holder][refused] = entries
			changed = append(changed, holder)
		}
	}
	slices.Sort(changed)
	return changed
}

// forget drops everything a deleted VidraResource recorded, and returns the holders
// whose view changed.
func (b *conflictBook) forget(refused string) []string {
	return b.record(refused, "", nil)
}

// heldAgainst describes the conflicts in which holder's values are in effect.
func (b *conflictBook) heldAgainst(holder string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var parts []string
	for refused, entries := range b.byHolder[holder] {
		parts = append(parts, fmt.Sprintf("%s declares %s differently", refused, strings.Join(entries, ", ")))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}
