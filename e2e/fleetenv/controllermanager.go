package fleetenv

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// ControllerManager is a kube-controller-manager process running some of its controllers
// against one cluster of the fleet. The e2e fleet runs none, so that no garbage collector
// or namespace controller acts behind the suites' backs; a suite that needs one (a
// namespace deleted for real) starts it for as long as it needs it.
type ControllerManager struct {
	cmd  *exec.Cmd
	logs *syncBuffer
}

// StartControllerManager runs kube-controller-manager (from the control plane's binary
// assets) with controllers against cluster; dir holds its kubeconfig. It runs until Stop.
func StartControllerManager(cluster *testfleet.Cluster, dir string, controllers ...string) (*ControllerManager, error) {
	assets, err := testfleet.BinaryAssetsDirectory()
	if err != nil {
		return nil, err
	}
	kubeconfig, err := cluster.WriteKubeconfig(dir)
	if err != nil {
		return nil, err
	}
	cm := &ControllerManager{logs: &syncBuffer{}}
	cm.cmd = exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--use-service-account-credentials=true", // as kubeadm runs it
		"--leader-elect=false",
		// No endpoint: nothing here probes it, and no port can clash.
		"--secure-port=0",
	)
	cm.cmd.Stdout, cm.cmd.Stderr = cm.logs, cm.logs
	if err := cm.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kube-controller-manager for %s: %w", cluster.Name, err)
	}
	return cm, nil
}

// Logs returns everything the controller manager wrote so far.
func (c *ControllerManager) Logs() []byte {
	return c.logs.Bytes()
}

// Stop ends the controller manager: SIGTERM, then SIGKILL after timeout. Its exit status
// is not an error: a controller manager ends on SIGTERM with a non-zero status.
func (c *ControllerManager) Stop(timeout time.Duration) error {
	var exit *exec.ExitError
	if err := testfleet.Terminate(c.cmd, timeout); err != nil && !errors.As(err, &exit) {
		return fmt.Errorf("stop kube-controller-manager: %w", err)
	}
	return nil
}
