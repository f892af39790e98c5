// Package tags picks, among a source's tags, the newest one a semver range accepts: the
// same rule for a Git repository's tags and an OCI repository's.
package tags

import (
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Newest returns the tag with the highest version that satisfies constraint. A tag is a
// version when it is strict semver after an optional "v" ("v1.2.0", "1.2.0"); others
// ("latest", "20240101", "1.9") are no version and never match. Pre-releases match only a
// range that names one. Of two tags of one version, the one without "v" is taken.
func Newest(names []string, constraint *semver.Constraints) (string, bool) {
	var best *semver.Version
	var bestTag string
	for _, tag := range names {
		v, err := semver.StrictNewVersion(strings.TrimPrefix(tag, "v"))
		if err != nil || !constraint.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) || (v.Equal(best) && tag < bestTag) {
			best, bestTag = v, tag
		}
	}
	return bestTag, best != nil
}
