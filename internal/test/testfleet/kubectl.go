package testfleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Kubectl runs the control plane's own kubectl (bin/k8s/kubectl, the same version as the
// API server) against the cluster as its admin, the way a user would, and returns stdout.
// stdin, when not nil, is passed to kubectl (for `apply -f -`). On failure the error holds
// kubectl's stderr.
func (c *Cluster) Kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	assets, err := BinaryAssetsDirectory()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "testfleet-kubectl-")
	if err != nil {
		return "", fmt.Errorf("temp dir for kubectl: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubeconfig, err := c.WriteKubeconfig(dir)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	// No cache or config from the user's home leaks into the test.
	cmd.Env = append(os.Environ(), "HOME="+dir, "KUBECACHEDIR="+filepath.Join(dir, "cache"))
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %v on %s: %w: %s", args, c.Name, err, stderr.String())
	}
	return stdout.String(), nil
}
