package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// binary is one built program for one platform.
type binary struct {
	name string // vidra or kubectl-vidra
	os   string
	arch string
	path string
}

// platform names a binary's platform as the release's files do: linux_amd64.
func (b binary) platform() string { return b.os + "_" + b.arch }

// targets are what a release builds: the operator for the image's platforms, the plugin
// for where users run kubectl.
var targets = []binary{
	{name: "vidra", os: "linux", arch: "amd64"},
	{name: "vidra", os: "linux", arch: "arm64"},
	{name: "kubectl-vidra", os: "linux", arch: "amd64"},
	{name: "kubectl-vidra", os: "linux", arch: "arm64"},
	{name: "kubectl-vidra", os: "darwin", arch: "amd64"},
	{name: "kubectl-vidra", os: "darwin", arch: "arm64"},
}

// buildBinaries builds every target into work, static and stamped with the version, one
// at a time: go build already uses every core.
func buildBinaries(ctx context.Context, cfg config, work string) ([]binary, error) {
	ldflags := "-s -w -X github.com/vidra-operator/vidra/internal/runtime/version.version=" + cfg.version
	built := make([]binary, 0, len(targets))
	for _, t := range targets {
		t.path = filepath.Join(work, t.platform(), t.name)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", t.path, "./cmd/"+t.name)
		cmd.Dir = cfg.root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.os, "GOARCH="+t.arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s for %s: %w\n%s", t.name, t.platform(), err, out)
		}
		built = append(built, t)
	}
	return built, nil
}

func operatorBinaries(all []binary) []binary { return named(all, "vidra") }

func pluginBinaries(all []binary) []binary { return named(all, "kubectl-vidra") }

func named(all []binary, name string) []binary {
	var out []binary
	for _, b := range all {
		if b.name == name {
			out = append(out, b)
		}
	}
	return out
}
