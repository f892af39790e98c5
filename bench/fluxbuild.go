package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// fluxController is one of Flux's controllers as the fluxrace phase runs it: built from
// its Go module, pinned, into bin/flux/<name>-<version> once, and reused after.
type fluxController struct {
	name, module, version string
}

// fluxControllers are the controllers Flux delivers a GitRepository with. The
// source-controller is v1.9.0: its v1.9.1 to v1.9.6 need github.com/fluxcd/pkg/artifact
// v0.18.1 to v0.18.3, which the module proxy this bench builds from does not serve (v1.9
// reads the same GitRepository API, source.toolkit.fluxcd.io/v1).
func fluxControllers() []fluxController {
	return []fluxController{
		{name: "source-controller", module: "github.com/fluxcd/source-controller", version: "v1.9.0"},
		{name: "kustomize-controller", module: "github.com/fluxcd/kustomize-controller", version: "v1.9.6"},
	}
}

// fluxBuild is a built controller: its binary and the CRDs its module ships.
type fluxBuild struct {
	fluxController
	binary string
	crds   string
}

// buildFlux builds each controller not built yet; a build takes a few minutes (the
// controllers link every cloud provider's SDK), once per machine.
func buildFlux(ctx context.Context, root string, log io.Writer) ([]fluxBuild, error) {
	var builds []fluxBuild
	for _, c := range fluxControllers() {
		b, err := c.build(ctx, root, log)
		if err != nil {
			return nil, fmt.Errorf("build %s %s: %w", c.name, c.version, err)
		}
		builds = append(builds, b)
	}
	return builds, nil
}

// build downloads the controller's module and builds it, unless its binary is there. The
// module's zip lacks its api/ folder, which its go.mod replaces the published api module
// with: the replace is dropped, so that the api module of the version it requires is
// used, as any other dependency.
func (c fluxController) build(ctx context.Context, root string, log io.Writer) (fluxBuild, error) {
	dir, err := downloadModule(ctx, c.module+"@"+c.version)
	if err != nil {
		return fluxBuild{}, err
	}
	b := fluxBuild{fluxController: c,
		binary: filepath.Join(root, "bin", "flux", c.name+"-"+c.version),
		crds:   filepath.Join(dir, "config", "crd", "bases")}
	if _, err := os.Stat(b.binary); err == nil {
		return b, nil
	}
	fmt.Fprintf(log, "  building %s %s from its module into %s (once; a few minutes)...\n", c.name, c.version, filepath.Dir(b.binary))
	started := time.Now()
	work, err := os.MkdirTemp("", "vidra-bench-flux-")
	if err != nil {
		return b, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	src := filepath.Join(work, c.name)
	if err := os.CopyFS(src, os.DirFS(dir)); err != nil {
		return b, fmt.Errorf("copy the module: %w", err)
	}
	if _, err := goCommand(ctx, src, "mod", "edit", "-dropreplace="+c.module+"/api"); err != nil {
		return b, err
	}
	// Built aside and moved into place, so that an interrupted build leaves no binary.
	partial := b.binary + ".partial"
	if _, err := goCommand(ctx, src, "build", "-mod=mod", "-trimpath", "-o", partial, "."); err != nil {
		return b, err
	}
	if err := os.Rename(partial, b.binary); err != nil {
		return b, err
	}
	fmt.Fprintf(log, "  built %s in %s\n", c.name, since(started))
	return b, nil
}

// downloadModule downloads module@version through the Go module proxy and returns its
// directory in the module cache (read-only). It runs outside any module: in Vidra's, the
// go command would add the module's sums to Vidra's go.sum.
func downloadModule(ctx context.Context, moduleVersion string) (string, error) {
	out, err := goCommand(ctx, os.TempDir(), "mod", "download", "-json", moduleVersion)
	if err != nil {
		return "", err
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", moduleVersion, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", moduleVersion, m.Error)
	}
	return m.Dir, nil
}

// goCommand runs the go command in dir and returns its standard output; its standard
// error is in the error when it fails.
func goCommand(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %v: %w: %s", args, err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes(), nil
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
