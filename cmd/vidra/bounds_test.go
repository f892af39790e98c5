package main

import (
	"strings"
	"testing"
	"time"
)

// The bounds of reading Infrahub default to what holds every sync the tests and docs
// describe, read sizes as the chart writes them, and refuse what would bound nothing.
func TestOptionsInfrahubBounds(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.operator; got.InfrahubSyncMaxArtifacts != 10000 || got.InfrahubSyncMaxBytes != 512<<20 ||
		got.InfrahubSyncTimeout != 10*time.Minute || got.InfrahubMemoryBudget != 512<<20 {
		t.Errorf("defaults: %d artifacts, %d bytes, %v, budget %d", got.InfrahubSyncMaxArtifacts, got.InfrahubSyncMaxBytes, got.InfrahubSyncTimeout, got.InfrahubMemoryBudget)
	}
	o, err = parseOptions([]string{"--infrahub-sync-max-artifacts=50", "--infrahub-sync-max-bytes=1Gi",
		"--infrahub-sync-timeout=90s", "--infrahub-memory-budget=134217728"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.operator; got.InfrahubSyncMaxArtifacts != 50 || got.InfrahubSyncMaxBytes != 1<<30 ||
		got.InfrahubSyncTimeout != 90*time.Second || got.InfrahubMemoryBudget != 128<<20 {
		t.Errorf("set: %d artifacts, %d bytes, %v, budget %d", got.InfrahubSyncMaxArtifacts, got.InfrahubSyncMaxBytes, got.InfrahubSyncTimeout, got.InfrahubMemoryBudget)
	}
	for _, args := range [][]string{
		{"--infrahub-sync-max-artifacts=0"}, {"--infrahub-sync-max-bytes=0"}, {"--infrahub-sync-max-bytes=lots"},
		{"--infrahub-sync-max-bytes=1.5"}, {"--infrahub-sync-timeout=0s"}, {"--infrahub-memory-budget=64Ki"},
	} {
		if _, err := parseOptions(args); err == nil || !strings.Contains(err.Error(), strings.Split(args[0], "=")[0][2:]) {
			t.Errorf("parseOptions(%v) = %v, want an error naming the flag", args, err)
		}
	}
}
