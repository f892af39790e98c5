package infrahub

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// relativeDate is the original Vidra's relative targetDate: now minus a number of
// seconds, minutes, hours or days.
var relativeDate = regexp.MustCompile(`^now-([0-9]+)([smhd])$`)

// At turns an InfrahubSync's targetDate into Infrahub's `at` for a sync starting at now:
// empty stays empty (the latest state); an RFC 3339 time is passed on in UTC; a relative
// date (now-2h) becomes the absolute time it means now. Every request of one sync uses
// the same `at`, so the listing and the downloads read one consistent snapshot even
// when a request takes a while.
func At(targetDate string, now time.Time) (string, error) {
	if targetDate == "" {
		return "", nil
	}
	if m := relativeDate.FindStringSubmatch(targetDate); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return "", fmt.Errorf("targetDate %q: %w", targetDate, err)
		}
		unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
		return now.Add(-time.Duration(n) * unit).UTC().Format(time.RFC3339), nil
	}
	t, err := time.Parse(time.RFC3339Nano, targetDate)
	if err != nil {
		return "", fmt.Errorf("targetDate %q: want an RFC 3339 time or now-<n><s|m|h|d>", targetDate)
	}
	return t.UTC().Format(time.RFC3339Nano), nil
}

// IsRelative reports whether targetDate moves with time (empty or now-…), so that a
// change in Infrahub can change what it selects.
func IsRelative(targetDate string) bool {
	return targetDate == "" || relativeDate.MatchString(targetDate)
}
