package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// checksumsFile lists the sha256 of every other file of the release, in the format
// `sha256sum -c` reads.
const checksumsFile = "checksums.txt"

func writeChecksums(out string) error {
	names, err := releaseFiles(out)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, name := range names {
		sum, err := sha256File(filepath.Join(out, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, name)
	}
	return os.WriteFile(filepath.Join(out, checksumsFile), []byte(b.String()), 0o644)
}

// releaseFiles lists the release's files but checksums.txt, sorted.
func releaseFiles(out string) ([]string, error) {
	entries, err := os.ReadDir(out)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", out, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != checksumsFile {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}
