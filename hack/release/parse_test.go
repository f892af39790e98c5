package main

import (
	"strings"
	"testing"
)

// A release needs a release's version and a registry without a scheme; it says which
// it lacks before building anything.
func TestReleaseRefusesWhatIsNotARelease(t *testing.T) {
	for args, want := range map[string]string{
		"-version 6395769 -source-date-epoch 1":                            "VERSION=vX.Y.Z",
		"-version v0.9.0-3-g6395769 -source-date-epoch 1":                  "VERSION=vX.Y.Z",
		"-version 0.9.0 -source-date-epoch 1":                              "VERSION=vX.Y.Z",
		"-version v0.9.0 -registry https://ghcr.io/x -source-date-epoch 1": "without a scheme",
		"-version v0.9.0": "source-date-epoch",
	} {
		if _, err := parse(strings.Fields(args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("release %s: %v, want an error saying %q", args, err, want)
		}
	}
	cfg, err := parse(strings.Fields("-version v1.2.0-rc.1 -registry oci://127.0.0.1:5000/rel/ -source-date-epoch 1700000000"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.registry != "127.0.0.1:5000/rel" || cfg.chartVersion() != "1.2.0-rc.1" || cfg.imageRepository() != "127.0.0.1:5000/rel/vidra" {
		t.Errorf("parsed %+v", cfg)
	}
}
