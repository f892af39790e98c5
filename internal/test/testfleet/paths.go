package testfleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ModuleRoot returns the root of the Vidra module by walking up from the working
// directory, so tests find bin/ and config/ wherever `go test` runs them from.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "apis", "v1alpha1")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no Vidra module root (go.mod beside apis/v1alpha1) above the working directory")
		}
		dir = parent
	}
}

// BinaryAssetsDirectory is where the control plane binaries are: $KUBEBUILDER_ASSETS when
// set, else bin/k8s of the module. It fails with a hint when kube-apiserver is missing.
func BinaryAssetsDirectory() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := ModuleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s")
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return "", fmt.Errorf("no kube-apiserver in %s: run `make control-plane` first: %w", dir, err)
	}
	return dir, nil
}

// CRDDirectory is config/crd/bases of the module: the generated CRDs of Vidra's API.
func CRDDirectory() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "config", "crd", "bases"), nil
}

// KubeVersion is the version of the control plane make control-plane builds. helm
// template takes it as --kube-version: without a cluster it assumes 1.20, which the
// chart's kubeVersion refuses.
const KubeVersion = "1.36.0"
