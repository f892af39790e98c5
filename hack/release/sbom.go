package main

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// sbomFile names a binary's SBOM.
func sbomFile(cfg config, b binary) string {
	return b.name + "_" + cfg.version + "_" + b.platform() + ".cdx.json"
}

// writeSBOM writes a CycloneDX SBOM of the Go modules linked into b, read from the
// build information Go records in every binary: what is in it, not what go.mod allows.
func writeSBOM(cfg config, b binary) error {
	info, err := buildinfo.ReadFile(b.path)
	if err != nil {
		return fmt.Errorf("reading the build information of %s: %w", b.path, err)
	}
	// The standard library is linked in too; SBOM tools name it pkg:golang/stdlib.
	components := []cdx.Component{moduleComponent("stdlib", info.GoVersion)}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		components = append(components, moduleComponent(dep.Path, dep.Version))
	}
	settings := []cdx.Property{}
	for _, s := range info.Settings {
		settings = append(settings, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: cfg.created.Format("2006-01-02T15:04:05Z"),
		Component: &cdx.Component{
			BOMRef:     "pkg:golang/" + info.Path + "@" + cfg.version,
			Type:       cdx.ComponentTypeApplication,
			Name:       b.name,
			Version:    cfg.version,
			PackageURL: "pkg:golang/" + info.Main.Path + "@" + cfg.version + "?goos=" + b.os + "&goarch=" + b.arch,
			Properties: &settings,
		},
	}
	bom.Components = &components
	f, err := os.Create(filepath.Join(cfg.out, sbomFile(cfg, b)))
	if err != nil {
		return err
	}
	if err := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", f.Name(), err)
	}
	return f.Close()
}

func moduleComponent(path, version string) cdx.Component {
	purl := "pkg:golang/" + path + "@" + version
	return cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: path, Version: version, PackageURL: purl}
}
