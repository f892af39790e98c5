package fleetenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// Operator is a running bin/vidra process.
type Operator struct {
	// MetricsURL and HealthURL are the base URLs of the metrics and probe endpoints.
	MetricsURL string
	HealthURL  string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the process's exit, valid once exited is closed
	logs   *syncBuffer
}

// OperatorBinary returns the operator binary to test: $VIDRA_BINARY when set (make test
// builds bin/vidra first), else bin/vidra freshly built from the working tree so a suite
// run on its own never tests a stale binary.
func OperatorBinary(ctx context.Context) (string, error) {
	return binary(ctx, "VIDRA_BINARY", "vidra")
}

// PluginBinary returns the kubectl plugin to test, as OperatorBinary does: $KUBECTL_VIDRA,
// else bin/kubectl-vidra freshly built.
func PluginBinary(ctx context.Context) (string, error) {
	return binary(ctx, "KUBECTL_VIDRA", "kubectl-vidra")
}

func binary(ctx context.Context, env, name string) (string, error) {
	if path := os.Getenv(env); path != "" {
		return path, nil
	}
	root, err := testfleet.ModuleRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, "bin", name)
	build := exec.CommandContext(ctx, "go", "build", "-o", path, "./cmd/"+name)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w: %s", path, err, out)
	}
	return path, nil
}

// StartOperator runs the operator binary with args plus free metrics and health ports.
// The process is not tied to ctx: it runs until Stop.
func StartOperator(ctx context.Context, args ...string) (*Operator, error) {
	binary, err := OperatorBinary(ctx)
	if err != nil {
		return nil, err
	}
	return StartBinary(binary, args...)
}

// StartBinary runs an operator binary of another build (an earlier version, say) as
// StartOperator runs this one.
func StartBinary(binary string, args ...string) (*Operator, error) {
	metricsAddr, err := FreeLocalAddress()
	if err != nil {
		return nil, err
	}
	healthAddr, err := FreeLocalAddress()
	if err != nil {
		return nil, err
	}
	args = append([]string{"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + healthAddr}, args...)
	op := &Operator{
		MetricsURL: "http://" + metricsAddr,
		HealthURL:  "http://" + healthAddr,
		cmd:        exec.Command(binary, args...),
		exited:     make(chan struct{}),
		logs:       &syncBuffer{},
	}
	op.cmd.Stdout = op.logs
	op.cmd.Stderr = op.logs
	if err := op.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	go func() {
		op.err = op.cmd.Wait()
		close(op.exited)
	}()
	return op, nil
}

// Logs returns everything the operator wrote so far.
func (o *Operator) Logs() []byte {
	return o.logs.Bytes()
}

// Exited returns a channel closed when the process ends.
func (o *Operator) Exited() <-chan struct{} {
	return o.exited
}

// ExitCode is the process's exit code, or -1 while it runs or when a signal killed it.
func (o *Operator) ExitCode() int {
	select {
	case <-o.exited:
		return o.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Stop sends SIGTERM, as Kubernetes does, and waits up to timeout for a clean exit before
// killing the process. It returns the exit error, if any.
func (o *Operator) Stop(timeout time.Duration) error {
	select {
	case <-o.exited:
		return o.err
	default:
	}
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM operator: %w", err)
	}
	select {
	case <-o.exited:
		return o.err
	case <-time.After(timeout):
		_ = o.cmd.Process.Kill()
		<-o.exited
		return fmt.Errorf("operator did not exit within %v of SIGTERM", timeout)
	}
}

// Kill ends the process with SIGKILL, as the kernel's OOM killer or a node failure
// would: no shutdown of any kind.
func (o *Operator) Kill() {
	select {
	case <-o.exited:
		return
	default:
	}
	_ = o.cmd.Process.Kill()
	<-o.exited
}

// Get fetches url and returns the status code and body.
func Get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// FreeLocalAddress returns a loopback address with a port free at the time of asking.
func FreeLocalAddress() (string, error) {
	return testfleet.FreeLocalAddress()
}

// syncBuffer is a bytes.Buffer safe for the process's writer and the test's reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// PeakRSS is the most resident memory the operator's process has held so far (the
// kernel's VmHWM); the render processes it starts are not counted.
func (o *Operator) PeakRSS() (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", o.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			return kib << 10, nil
		}
	}
	return 0, errors.New("no VmHWM in the operator's /proc status")
}
