package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// printNotes prints a release's notes: its section of CHANGELOG.md, which the release
// workflow publishes. A release without one is refused, so that none goes out unexplained.
func printNotes(root, version string, stdout io.Writer) error {
	f, err := os.Open(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return fmt.Errorf("reading the changelog: %w", err)
	}
	defer func() { _ = f.Close() }()
	notes, err := section(f, version)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, notes)
	return err
}

// section returns the lines under the heading "## <version>" (anything may follow the
// version, a date say) up to the next heading of that level, trimmed.
func section(changelog io.Reader, version string) (string, error) {
	var b strings.Builder
	in := false
	scanner := bufio.NewScanner(changelog)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "## ") {
			fields := strings.Fields(line)
			in = len(fields) > 1 && fields[1] == version
			continue
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	if err := scanner.Err(); err != nil {
		return "", fmt.Errorf("reading the changelog: %w", err)
	}
	notes := strings.TrimSpace(b.String())
	if notes == "" {
		return "", fmt.Errorf("CHANGELOG.md has no section \"## %s\": write the release's notes there first", version)
	}
	return notes + "\n", nil
}
