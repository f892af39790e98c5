package infrahubtest

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// absoluteLayouts are the ISO-8601 shapes Infrahub's Timestamp accepts. Go
// accepts a fractional second after the seconds field even when the layout
// does not mention it, so one layout covers both forms.
var absoluteLayouts = []string{
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05Z0700",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05Z0700",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
}

// Longer unit spellings come first: RE2 prefers the leftmost alternative, and
// "30min" must not be read as "30m" followed by garbage.
const relativeUnit = `(seconds|second|secs|sec|s|minutes|minute|mins|min|m|hours|hour|h)`

var (
	relativeWhole = regexp.MustCompile(`^(?:\d+` + relativeUnit + `)+$`)
	relativePart  = regexp.MustCompile(`(\d+)` + relativeUnit)
)

var errInvalidTime = errors.New("invalid time")

// parseAt interprets an `at` query parameter. The empty string means "now"
// (ok=false), as Infrahub treats a missing or empty value. The relative grammar
// is deliberately strict (whole string, no spaces, no "now-" prefix) so that a
// client sending an untranslated form such as "now-2h" notices.
func parseAt(value string, now time.Time) (t time.Time, ok bool, err error) {
	if value == "" {
		return time.Time{}, false, nil
	}
	for _, layout := range absoluteLayouts {
		// time.Parse yields UTC when the layout has no zone, which is
		// Infrahub's rule for offset-less values.
		if t, err := time.Parse(layout, value); err == nil {
			return t.UTC(), true, nil
		}
	}
	if !relativeWhole.MatchString(value) {
		return time.Time{}, false, errInvalidTime
	}
	var total time.Duration
	for _, m := range relativePart.FindAllStringSubmatch(value, -1) {
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return time.Time{}, false, errInvalidTime
		}
		unit := time.Second
		switch {
		case strings.HasPrefix(m[2], "h"):
			unit = time.Hour
		case strings.HasPrefix(m[2], "m"):
			unit = time.Minute
		}
		if n > math.MaxInt64/int64(unit) || total > math.MaxInt64-time.Duration(n)*unit {
			return time.Time{}, false, errInvalidTime
		}
		total += time.Duration(n) * unit
	}
	return now.Add(-total).UTC(), true, nil
}
