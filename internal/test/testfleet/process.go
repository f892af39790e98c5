package testfleet

import (
	"errors"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// FreeLocalAddress returns a loopback address with a port free at the time of asking,
// for a process started next to a fleet (the operator's metrics, a webhook receiver). It
// never hands the same port out twice in one process: the kernel may offer a port again
// once its listener closes, before the process it was meant for has bound it, and two
// listeners of one operator then collide.
func FreeLocalAddress() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
		}
	}
	return "", errors.New("no loopback port that was not handed out already")
}

// handedOut is the ports FreeLocalAddress gave this test process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

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
