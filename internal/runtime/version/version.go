// Package version says which version of Vidra a binary is: what the build set with
// -ldflags "-X github.com/vidra-operator/vidra/internal/runtime/version.version=VERSION", else
// the module version Go recorded, else "dev". A pull cluster's agent reports it to the
// hub, which shows an agent of another version than its own.
package version

import "runtime/debug"

// version is set by the linker; it is never written at run time.
var version string

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
