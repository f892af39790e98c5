package main

import (
	"bytes"
	"fmt"
	"path/filepath"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/vidra-operator/vidra/internal/runtime/version"
)

// packageChart packages charts/vidra as the release's chart, vidra-X.Y.Z.tgz: version
// X.Y.Z, appVersion vX.Y.Z (the image tag it runs by default), and the release's image
// repository. It returns the archive's path.
func packageChart(cfg config) (string, error) {
	ch, err := loader.LoadDir(filepath.Join(cfg.root, "charts", "vidra"))
	if err != nil {
		return "", fmt.Errorf("loading the chart: %w", err)
	}
	ch.Metadata.Version = cfg.chartVersion()
	ch.Metadata.AppVersion = cfg.version
	ch.ModTime, ch.SchemaModTime = cfg.created, cfg.created
	for _, files := range [][]*common.File{ch.Raw, ch.Templates, ch.Files} {
		for _, f := range files {
			f.ModTime = cfg.created
		}
	}
	if err := setImageRepository(ch.Raw, cfg.imageRepository()); err != nil {
		return "", err
	}
	path, err := chartutil.Save(ch, cfg.out)
	if err != nil {
		return "", fmt.Errorf("packaging the chart: %w", err)
	}
	return path, nil
}

// setImageRepository points the chart's values.yaml at repo, in its text so that its
// comments stay for `helm show values`. Save writes values.yaml from that text.
func setImageRepository(raw []*common.File, repo string) error {
	current := []byte("repository: " + version.ImageRepository + "\n")
	for _, f := range raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		if n := bytes.Count(f.Data, current); n != 1 {
			return fmt.Errorf("the chart's values.yaml names %q %d times, not once", current, n)
		}
		f.Data = bytes.Replace(f.Data, current, []byte("repository: "+repo+"\n"), 1)
		return nil
	}
	return fmt.Errorf("the chart has no %s", chartutil.ValuesfileName)
}
