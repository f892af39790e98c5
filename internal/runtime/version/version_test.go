package version

import "testing"

func TestOnlyAReleaseNamesAnImage(t *testing.T) {
	for v, want := range map[string]string{
		"v0.9.0":                  ImageRepository + ":v0.9.0",
		"v1.10.2-rc.1":            ImageRepository + ":v1.10.2-rc.1",
		"v0.9.0-3-g1a2b3c4":       "", // git describe between releases
		"v0.9.0-3-g1a2b3c4-dirty": "",
		"1a2b3c4":                 "", // git describe without a tag
		"dev":                     "",
		"0.9.0":                   "", // a release's version starts with v
		"v01.2.3":                 "",
	} {
		got, ok := ReleaseImage(v)
		if got != want || ok != (want != "") {
			t.Errorf("ReleaseImage(%q) = %q, %v; want %q", v, got, ok, want)
		}
	}
}
