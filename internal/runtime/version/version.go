// Package version says which version of Vidra a binary is: what the build set with
// -ldflags "-X github.com/vidra-operator/vidra/internal/runtime/version.version=VERSION", else
// the module version Go recorded, else "dev". A pull cluster's agent reports it to the
// hub, which shows an agent of another version than its own.
package version

import (
	"regexp"
	"runtime/debug"
)

// version is set by the linker; it is never written at run time.
var version string

// ImageRepository is where a release publishes the operator's image, tagged with the
// release's version.
const ImageRepository = "ghcr.io/vidra-operator/vidra"

// release matches the version of a release, vX.Y.Z (a pre-release such as v1.0.0-rc.1
// included), as `make release VERSION=…` sets it; a build between releases is
// described by git as vX.Y.Z-N-gHASH, or a bare hash, and has no image of its own.
var release = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(alpha|beta|rc)\.[0-9]+)?$`)

// Get returns the binary's version.
func Get() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

// IsRelease says whether v is the version of a release, vX.Y.Z or a pre-release of one.
func IsRelease(v string) bool { return release.MatchString(v) }

// ReleaseImage is the operator's image of the release v, and whether v is a release: a
// development build names no image anybody built.
func ReleaseImage(v string) (string, bool) {
	if !IsRelease(v) {
		return "", false
	}
	return ImageRepository + ":" + v, true
}
