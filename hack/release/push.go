package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v4/pkg/registry"
)

// pushedFile lists what the release pushed, each as repository:tag@digest, for signing
// and for users to pin.
const pushedFile = "pushed.txt"

// push pushes the image to $REGISTRY/vidra:vX.Y.Z and the chart to
// oci://$REGISTRY/charts/vidra:X.Y.Z, with the credentials `docker login` stored (for the
// chart, `helm registry login`'s first), and writes pushed.txt.
func push(ctx context.Context, cfg config, rel release, stdout io.Writer) error {
	var opts []name.Option
	if cfg.plainHTTP {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.NewTag(cfg.imageRepository()+":"+cfg.version, opts...)
	if err != nil {
		return fmt.Errorf("the image's reference: %w", err)
	}
	if err := remote.WriteIndex(ref, rel.image, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing the image to %s: %w", ref, err)
	}
	digest, err := rel.image.Digest()
	if err != nil {
		return err
	}
	image := ref.String() + "@" + digest.String()
	fmt.Fprintln(stdout, "pushed", image)
	chart, err := pushChart(cfg, rel.chart)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pushed oci://%s, which runs %s\n", chart, ref)
	return os.WriteFile(filepath.Join(cfg.out, pushedFile), []byte(image+"\n"+chart+"\n"), 0o644)
}

// pushChart pushes the chart and returns its reference by digest.
func pushChart(cfg config, path string) (string, error) {
	var opts []registry.ClientOption
	if cfg.plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(append(opts, registry.ClientOptWriter(io.Discard))...)
	if err != nil {
		return "", fmt.Errorf("a registry client for the chart: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the chart: %w", err)
	}
	ref := cfg.registry + "/charts/vidra:" + cfg.chartVersion()
	res, err := client.Push(data, ref, registry.PushOptStrictMode(true),
		registry.PushOptCreationTime(cfg.created.Format("2006-01-02T15:04:05Z")))
	if err != nil {
		return "", fmt.Errorf("pushing the chart to oci://%s: %w", ref, err)
	}
	return ref + "@" + res.Manifest.Digest, nil
}
