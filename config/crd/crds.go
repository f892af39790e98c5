// Package crd holds Vidra's CustomResourceDefinitions as make generate writes them into
// bases/, for the kubectl plugin, which installs them on the member of a pull cluster
// (its agent keeps its copies of the hub's bundles as VidraResources there).
package crd

import "embed"

// Bases are the files of bases/.
//
//go:embed bases/*.yaml
var Bases embed.FS
