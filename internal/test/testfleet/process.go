package testfleet

import (
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// FreeLocalAddress returns a loopback address with a port free at the time of asking,
// for a process started next to a fleet (the operator's metrics, a webhook receiver).
func FreeLocalAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

// Terminate ends a started process as Kubernetes ends a pod: SIGTERM, then SIGKILL if it
// has not exited within grace. It returns the process's exit.
func Terminate(cmd *exec.Cmd, grace time.Duration) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		return <-done
	}
}
