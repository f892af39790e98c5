package main

import (
	"strings"
	"testing"
)

const changelog = `# Changelog

## Unreleased

- Something new.

## v0.10.0 (2026-12-01)

### Fixed

- A bug.

## v0.1.0

- The first.
`

// A release's notes are its own section of the changelog, and a release without one
// is refused rather than published with none.
func TestNotesAreTheReleasesSectionOfTheChangelog(t *testing.T) {
	got, err := section(strings.NewReader(changelog), "v0.10.0")
	if want := "### Fixed\n\n- A bug.\n"; err != nil || got != want {
		t.Errorf("the notes of v0.10.0 are %q (%v), want %q", got, err, want)
	}
	for _, v := range []string{"v0.1", "v0.9.0", "Changelog"} {
		if notes, err := section(strings.NewReader(changelog), v); err == nil {
			t.Errorf("%s has notes %q, want an error", v, notes)
		}
	}
}
