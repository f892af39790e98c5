package testfleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Cluster is one control plane of a fleet: a kube-apiserver with its etcd, and optionally
// a kube-controller-manager.
type Cluster struct {
	// Name is "hub" or "member-N".
	Name string
	// Config authenticates as a cluster admin (system:masters).
	Config *rest.Config
	// Client is a controller-runtime client built from Config.
	Client client.Client
	// Kubeconfig is Config as a self-contained kubeconfig (certificates inline), the form
	// a user puts into an enrollment Secret.
	Kubeconfig []byte

	env *envtest.Environment
	// certDir holds the API server's certificates, kept across StopAPIServer and
	// StartAPIServer (envtest's own would be made anew, with a new serving CA).
	certDir           string
	controllerManager *exec.Cmd
	// controllerManagerExited receives the controller manager's exit once it ends.
	controllerManagerExited chan error
	workDir                 string
}

type clusterSpec struct {
	name           string
	assets         string
	crdDirectories []string
	scheme         *runtime.Scheme
	// controllers are the kube-controller-manager controllers run beside the API server
	// (none: no controller manager).
	controllers []string
}

// Controllers of kube-controller-manager a fleet may run.
const (
	GarbageCollector       = "garbage-collector-controller"
	NamespaceController    = "namespace-controller"
	ClusterRoleAggregation = "clusterrole-aggregation-controller"
	ServiceAccountToken    = "serviceaccount-token-controller"
	gcSyncedLine           = "all resource monitors have synced"
	cachesSyncedLine       = "Caches are synced"
)

func startCluster(ctx context.Context, spec clusterSpec) (*Cluster, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory: spec.assets,
		CRDDirectoryPaths:     spec.crdDirectories,
		ErrorIfCRDPathMissing: len(spec.crdDirectories) > 0,
		Scheme:                spec.scheme,
		// Fleets start side by side with other packages' on two cores: envtest's 20s is
		// too short for a kube-apiserver then.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	// The aggregator proxies to an APIService's endpoints rather than its Service's
	// cluster IP, which nothing routes here (there is no kube-proxy).
	env.ControlPlane.GetAPIServer().Configure().Set("enable-aggregator-routing", "true")
	certDir, err := os.MkdirTemp("", "testfleet-apiserver-")
	if err != nil {
		return &Cluster{Name: spec.name}, fmt.Errorf("certificate dir of %s: %w", spec.name, err)
	}
	env.ControlPlane.GetAPIServer().CertDir = certDir
	cfg, err := env.Start()
	c := &Cluster{Name: spec.name, env: env, certDir: certDir}
	if err != nil {
		return c, fmt.Errorf("start control plane %s: %w", spec.name, err)
	}
	c.Config = cfg
	c.Kubeconfig = env.KubeConfig
	if c.Client, err = client.New(cfg, client.Options{Scheme: spec.scheme}); err != nil {
		return c, fmt.Errorf("client for %s: %w", spec.name, err)
	}
	if len(spec.controllers) > 0 {
		if err := c.startControllerManager(ctx, spec.assets, spec.controllers); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Server is the URL of the cluster's API server.
func (c *Cluster) Server() string {
	return c.Config.Host
}

// EtcdURL is the address of the cluster's etcd, for a caller that removes what the API
// server stores faster than the API server can (the bench's clear between its workloads).
func (c *Cluster) EtcdURL() string {
	return c.env.ControlPlane.Etcd.URL.String()
}

// WriteKubeconfig writes the cluster's kubeconfig into dir and returns its path.
func (c *Cluster) WriteKubeconfig(dir string) (string, error) {
	path := filepath.Join(dir, c.Name+".kubeconfig")
	if err := os.WriteFile(path, c.Kubeconfig, 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig of %s: %w", c.Name, err)
	}
	return path, nil
}

// Pause freezes the cluster's kube-apiserver (SIGSTOP): connections are accepted by the
// kernel but never answered, as with a cluster behind a dead network path. It returns once
// the process is stopped.
func (c *Cluster) Pause() error {
	return c.signalAPIServer(syscall.SIGSTOP, true)
}

// PauseInTest pauses the cluster's API server for a test, which may Resume it itself;
// it is resumed when the test ends whatever happens, so no later test meets it frozen.
func (c *Cluster) PauseInTest(t testing.TB) {
	t.Helper()
	if err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Resume() })
}

// StopAPIServer kills the cluster's kube-apiserver (SIGKILL), as a crash of its control
// plane would: connections are refused until StartAPIServer; etcd, and all it stores,
// stay. It returns once the process is gone.
func (c *Cluster) StopAPIServer() error {
	pid, err := c.apiServerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill kube-apiserver of %s: %w", c.Name, err)
	}
	// envtest waits for its process, so it is reaped once it exits.
	for range 1000 {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver of %s (pid %d) still runs 10 s after SIGKILL", c.Name, pid)
}

// StartAPIServer starts the API server StopAPIServer stopped, on the same address with
// the same certificates and service account keys: every kubeconfig and token still
// holds. It returns once the API server is healthy.
func (c *Cluster) StartAPIServer() error {
	if err := c.env.ControlPlane.GetAPIServer().Start(); err != nil {
		return fmt.Errorf("start the API server of %s again: %w", c.Name, err)
	}
	return nil
}

// Resume undoes Pause; resuming a running API server does nothing.
func (c *Cluster) Resume() error {
	return c.signalAPIServer(syscall.SIGCONT, false)
}

func (c *Cluster) signalAPIServer(sig syscall.Signal, stopped bool) error {
	pid, err := c.apiServerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %v to kube-apiserver of %s: %w", sig, c.Name, err)
	}
	// Signal delivery is asynchronous: wait until the kernel reports the new state, so a
	// request made right after Pause cannot still be served.
	for range 500 {
		if isStopped(pid) == stopped {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver of %s (pid %d) did not reach stopped=%v after %v", c.Name, pid, stopped, sig)
}

// isStopped reports whether the process is in state T (stopped) per /proc/PID/stat.
func isStopped(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'T'
}

// apiServerPID finds the cluster's kube-apiserver among the processes by its unique
// certificate directory; envtest does not expose the PID.
func (c *Cluster) apiServerPID() (int, error) {
	certDir := c.env.ControlPlane.APIServer.CertDir
	if certDir == "" {
		return 0, fmt.Errorf("kube-apiserver of %s has no certificate directory", c.Name)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	want := []byte("--cert-dir=" + certDir + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte("kube-apiserver")) && bytes.Contains(cmdline, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("kube-apiserver of %s (cert dir %s) not found", c.Name, certDir)
}

// startControllerManager runs the controllers against the cluster and waits until they
// report ready.
func (c *Cluster) startControllerManager(ctx context.Context, assets string, controllers []string) error {
	dir, err := os.MkdirTemp("", "testfleet-kcm-")
	if err != nil {
		return fmt.Errorf("work dir for kube-controller-manager of %s: %w", c.Name, err)
	}
	c.workDir = dir
	kubeconfig, err := c.WriteKubeconfig(dir)
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		return fmt.Errorf("log for kube-controller-manager of %s: %w", c.Name, err)
	}
	defer func() { _ = log.Close() }()
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		// Each controller acts as its own ServiceAccount (kube-system/generic-garbage-collector,
		// ...), as kubeadm runs them: admission sees who a real cluster's controllers are.
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
	}
	if slices.Contains(controllers, ServiceAccountToken) {
		// The key the API server signs ServiceAccount tokens with, which envtest made.
		args = append(args, "--service-account-private-key-file="+filepath.Join(c.env.ControlPlane.APIServer.CertDir, "sa-signer.key"))
	}
	// The context only bounds start-up: the process lives until Stop.
	cmd := exec.Command(filepath.Join(assets, "kube-controller-manager"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start kube-controller-manager of %s: %w", c.Name, err)
	}
	c.controllerManager = cmd
	c.controllerManagerExited = make(chan error, 1)
	go func() { c.controllerManagerExited <- cmd.Wait() }()
	ready := cachesSyncedLine
	if slices.Contains(controllers, GarbageCollector) {
		ready = gcSyncedLine // the last of them to get ready
	}
	return waitForControllerManager(ctx, c, filepath.Join(dir, "kube-controller-manager.log"), ready)
}

// waitForControllerManager waits until the controller manager's log says ready (the
// garbage collector synced, or another controller's caches); with --secure-port=0 it serves no
// health endpoint to poll.
func waitForControllerManager(ctx context.Context, c *Cluster, logPath, ready string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		out, err := os.ReadFile(logPath)
		if err == nil && strings.Contains(string(out), ready) {
			return nil
		}
		select {
		case err := <-c.controllerManagerExited:
			c.controllerManagerExited <- err // Stop reads it again.
			return fmt.Errorf("kube-controller-manager of %s exited: %w: %s", c.Name, err, tail(out))
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager of %s not started: %w: %s", c.Name, ctx.Err(), tail(out))
		case <-ticker.C:
		}
	}
}

func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Stop stops the cluster's processes; a paused API server is resumed first so it can
// shut down.
func (c *Cluster) Stop() error {
	var errs []error
	if c.controllerManager != nil {
		_ = c.controllerManager.Process.Kill()
		<-c.controllerManagerExited
	}
	if c.env != nil && c.Config != nil {
		_ = c.Resume()
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop control plane %s: %w", c.Name, err))
		}
	}
	for _, dir := range []string{c.workDir, c.certDir} {
		if dir != "" {
			errs = append(errs, os.RemoveAll(dir))
		}
	}
	return errors.Join(errs...)
}

// reapOrphans kills control plane processes of assets whose test process died without
// stopping them (a panic skips deferred cleanups): they are children of init by then, and
// would otherwise hold ports and memory for the rest of the run.
func reapOrphans(assets string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	prefix := []byte(filepath.Clean(assets) + "/")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(cmdline, prefix) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name: state, then the parent's PID.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == "1" {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// AddUser provisions a user with a client certificate on the cluster and returns a
// kubeconfig for it, like Kubeconfig but with other credentials (for rotation and RBAC
// tests). Groups such as system:masters give it rights.
func (c *Cluster) AddUser(name string, groups ...string) ([]byte, error) {
	user, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %s to %s: %w", name, c.Name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of user %s on %s: %w", name, c.Name, err)
	}
	return kubeconfig, nil
}
