// Command release builds a Vidra release without a container runtime: the operator's
// image for linux/amd64 and linux/arm64 as an OCI image index, the chart, the kubectl
// plugin's archives and krew manifest, an SBOM of each binary's Go modules and
// checksums.txt. Given a registry it pushes the image and the chart there, the chart
// defaulting to the image pushed. `make release VERSION=vX.Y.Z` runs it;
// `release notes vX.Y.Z` prints the release's notes from CHANGELOG.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/vidra-operator/vidra/internal/runtime/version"
)

// config is one release: what to build and where it goes.
type config struct {
	version     string    // vX.Y.Z
	root        string    // the repository's root
	out         string    // where the release's files are written
	registry    string    // host[:port]/path to push to; empty pushes nothing
	plainHTTP   bool      // the registry speaks HTTP, not HTTPS (a registry on loopback)
	downloadURL string    // where the plugin's archives are published, for krew
	created     time.Time // the commit's time: every timestamp in the release
}

// chartVersion is the chart's version: the release's, without the v.
func (c config) chartVersion() string { return strings.TrimPrefix(c.version, "v") }

// imageRepository is where the release's image lives: the registry pushed to, else the
// repository every release publishes to.
func (c config) imageRepository() string {
	if c.registry != "" {
		return c.registry + "/vidra"
	}
	return version.ImageRepository
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 2 && args[0] == "notes" {
		return printNotes(".", args[1], stdout)
	}
	cfg, err := parse(args)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := os.RemoveAll(cfg.out); err != nil {
		return fmt.Errorf("clearing %s: %w", cfg.out, err)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", cfg.out, err)
	}
	work, err := os.MkdirTemp("", "vidra-release-")
	if err != nil {
		return fmt.Errorf("creating a build directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()

	rel, err := build(ctx, cfg, work)
	if err != nil {
		return err
	}
	if cfg.registry != "" {
		if err := push(ctx, cfg, rel, stdout); err != nil {
			return err
		}
	}
	if err := writeChecksums(cfg.out); err != nil {
		return err
	}
	return report(stdout, cfg, time.Since(start))
}

// release is what build made, for push.
type release struct {
	image v1.ImageIndex
	chart string // the packaged chart's path
}

// build writes every file of the release to cfg.out.
func build(ctx context.Context, cfg config, work string) (release, error) {
	binaries, err := buildBinaries(ctx, cfg, work)
	if err != nil {
		return release{}, err
	}
	for _, b := range binaries {
		if err := writeSBOM(cfg, b); err != nil {
			return release{}, err
		}
	}
	img, err := buildImage(cfg, operatorBinaries(binaries))
	if err != nil {
		return release{}, err
	}
	if err := writeImageArchive(cfg, img, work); err != nil {
		return release{}, err
	}
	if err := writePluginArchives(cfg, pluginBinaries(binaries)); err != nil {
		return release{}, err
	}
	chart, err := packageChart(cfg)
	if err != nil {
		return release{}, err
	}
	return release{image: img, chart: chart}, nil
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	cfg := config{}
	fs.StringVar(&cfg.version, "version", "", "the release's version, vX.Y.Z")
	fs.StringVar(&cfg.root, "root", ".", "the repository's root")
	fs.StringVar(&cfg.out, "out", "bin/release", "where to write the release")
	fs.StringVar(&cfg.registry, "registry", "", "host[:port]/path to push the image and chart to")
	fs.BoolVar(&cfg.plainHTTP, "plain-http", false, "speak HTTP to the registry (a registry on loopback)")
	fs.StringVar(&cfg.downloadURL, "download-url", "https://github.com/vidra-operator/vidra/releases/download",
		"where the plugin's archives are published, under <version>/")
	epoch := fs.String("source-date-epoch", "", "the commit's time in Unix seconds: every timestamp in the release")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if !version.IsRelease(cfg.version) {
		return config{}, fmt.Errorf("the version %q is not a release's: give VERSION=vX.Y.Z (or vX.Y.Z-rc.N)", cfg.version)
	}
	cfg.registry = strings.TrimSuffix(strings.TrimPrefix(cfg.registry, "oci://"), "/")
	if strings.Contains(cfg.registry, "://") {
		return config{}, errors.New("give REGISTRY as host[:port]/path, without a scheme")
	}
	seconds, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return config{}, fmt.Errorf("source-date-epoch %q: %w", *epoch, err)
	}
	cfg.created = time.Unix(seconds, 0).UTC()
	for _, p := range []*string{&cfg.root, &cfg.out} {
		if *p, err = filepath.Abs(*p); err != nil {
			return config{}, fmt.Errorf("resolving %s: %w", *p, err)
		}
	}
	return cfg, nil
}
