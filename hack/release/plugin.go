package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// pluginArchive names the plugin's archive for a platform, as krew and users fetch it.
func pluginArchive(cfg config, b binary) string {
	return "kubectl-vidra_" + cfg.version + "_" + b.platform() + ".tar.gz"
}

// krewManifest names the plugin's manifest for krew's index.
const krewManifest = "kubectl-vidra.yaml"

// writePluginArchives writes one archive per platform, holding the plugin and the
// license, and the krew manifest that names them.
func writePluginArchives(cfg config, binaries []binary) error {
	license, err := os.ReadFile(filepath.Join(cfg.root, "LICENSE"))
	if err != nil {
		return fmt.Errorf("reading the license the archives carry: %w", err)
	}
	var platforms []krewPlatform
	for _, b := range binaries {
		data, err := os.ReadFile(b.path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", b.path, err)
		}
		name := pluginArchive(cfg, b)
		path := filepath.Join(cfg.out, name)
		err = writeTarGzip(path, []entry{
			{name: "LICENSE", mode: 0o644, data: license},
			{name: "kubectl-vidra", mode: 0o755, data: data},
		}, cfg.created)
		if err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		sum, err := sha256File(path)
		if err != nil {
			return err
		}
		platforms = append(platforms, krewPlatform{
			Selector: krewSelector{MatchLabels: map[string]string{"os": b.os, "arch": b.arch}},
			URI:      cfg.downloadURL + "/" + cfg.version + "/" + name,
			SHA256:   sum,
			Bin:      "kubectl-vidra",
			Files:    []krewFile{{From: "kubectl-vidra", To: "."}, {From: "LICENSE", To: "."}},
		})
	}
	return writeKrewManifest(cfg, platforms)
}

// The krew plugin manifest, krew.googlecontainertools.github.com/v1alpha2, as far as the
// release fills it.
type krewPlugin struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   krewMetadata `json:"metadata"`
	Spec       krewSpec     `json:"spec"`
}

type krewMetadata struct {
	Name string `json:"name"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector krewSelector `json:"selector"`
	URI      string       `json:"uri"`
	SHA256   string       `json:"sha256"`
	Bin      string       `json:"bin"`
	Files    []krewFile   `json:"files"`
}

type krewSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func writeKrewManifest(cfg config, platforms []krewPlatform) error {
	data, err := yaml.Marshal(krewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   krewMetadata{Name: "vidra"},
		Spec: krewSpec{
			Version:          cfg.version,
			Homepage:         "https://github.com/vidra-operator/vidra",
			ShortDescription: "Enroll clusters in a Vidra hub and see its fleet",
			Description: "Enrolls a cluster in a Vidra hub with a scoped identity, shows the fleet's " +
				"syncs and deliveries, previews a change on each cluster, and rolls back.",
			Platforms: platforms,
		},
	})
	if err != nil {
		return fmt.Errorf("writing the krew manifest: %w", err)
	}
	return os.WriteFile(filepath.Join(cfg.out, krewManifest), data, 0o644)
}

func sha256File(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
