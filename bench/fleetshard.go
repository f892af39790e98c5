package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vidra-operator/vidra/internal/fleet/sharding"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// shardIdleWindow is how long the split fleet's Lease requests are counted.
const shardIdleWindow = 30 * time.Second

// shardLeaseDuration is the replicas' --shard-lease-duration, the operator's default: how
// long a killed replica's fences are honoured.
const shardLeaseDuration = 15 * time.Second

// shardedResult is the largest fleet, delivered, taken over by -fleet-replicas replicas
// (--sharding) in place of the one operator: how they split it, and how long the
// survivors take to take over a killed replica's clusters.
type shardedResult struct {
	Clusters int `json:"clusters"`
	Replicas int `json:"replicas"`
	// SplitSeconds is from the replicas' start to every cluster's fence held by the
	// replica rendezvous hashing picks; ClustersPerReplica is then each one's share, and
	// Spread the largest distance of a share from the mean, as a fraction of the mean.
	SplitSeconds       float64 `json:"splitSeconds"`
	ClustersPerReplica []int   `json:"clustersPerReplica"`
	Spread             float64 `json:"spread"`
	// TakeoverSeconds is from one replica killed (SIGKILL) to every one of its clusters'
	// fences held by the survivor the hash picks among them; LeaseDurationSeconds is the
	// replicas' --shard-lease-duration, which a killed holder's fences outlive.
	TakeoverSeconds      float64 `json:"takeoverSeconds"`
	LeaseDurationSeconds float64 `json:"leaseDurationSeconds"`
	// SplitLeaseRequests are the hub's requests on Leases, by anyone, from the replicas'
	// start to the split; IdleLeaseRequestsPerMinute over shardIdleWindow after it, when
	// only renewals remain (the replicas' peer Leases, the leader's, the API server's
	// own): none of them grows with the clusters.
	SplitLeaseRequests         float64 `json:"splitLeaseRequests"`
	IdleLeaseRequestsPerMinute float64 `json:"idleLeaseRequestsPerMinute"`
	IdleLeaseRequests          string  `json:"idleLeaseRequestsPerMinuteByVerb"`
	// Error says why the replicas did not split the fleet or take it over, when they did
	// not: a figure of its own, the others of the run are kept.
	Error string `json:"error,omitempty"`
}

// measureSharded stops the operator of the fleet just measured and starts -fleet-replicas
// replicas with --sharding in its place; once they have split the fleet, it kills one.
func (f *fleetRun) measureSharded(ctx context.Context) (shardedResult, error) {
	n := len(f.clusters)
	sr := shardedResult{Clusters: n, Replicas: f.FleetReplicas, LeaseDurationSeconds: shardLeaseDuration.Seconds()}
	names := make([]string, n)
	for i, c := range f.clusters {
		names[i] = c.name
	}
	f.stopOperator()
	var peers []string
	replicas := map[string]*exec.Cmd{}
	defer func() { f.stopReplicas(replicas) }()
	leasesBefore, err := f.hubRequests(ctx, onLeases)
	if err != nil {
		return sr, err
	}
	kubeconfig, err := f.fleet.Hub.WriteKubeconfig(f.dir)
	if err != nil {
		return sr, err
	}
	start := time.Now()
	for i := range f.FleetReplicas {
		id := fmt.Sprintf("bench-%d", i)
		cmd, err := f.startReplica(id, kubeconfig, f.FleetResync, "0", "")
		if err != nil {
			return sr, err
		}
		fmt.Fprintf(f.log, "replica log: %s\n", filepath.Join(f.dir, "replica-"+id+".log"))
		replicas[id], peers = cmd, append(peers, id)
	}
	held, err := f.waitForFences(ctx, names, peers, 5*time.Minute)
	if err != nil {
		return sr, fmt.Errorf("the replicas split the fleet: %w", err)
	}
	sr.SplitSeconds = time.Since(start).Seconds()
	if err := f.countIdleLeases(ctx, leasesBefore, &sr); err != nil {
		return sr, err
	}
	mean := float64(n) / float64(len(peers))
	for _, p := range peers {
		share := 0
		for _, holder := range held {
			if holder == p {
				share++
			}
		}
		sr.ClustersPerReplica = append(sr.ClustersPerReplica, share)
		sr.Spread = max(sr.Spread, math.Abs(float64(share)-mean)/mean)
	}
	killed := peers[0]
	if err := replicas[killed].Process.Kill(); err != nil {
		return sr, fmt.Errorf("kill %s: %w", killed, err)
	}
	_ = replicas[killed].Wait()
	delete(replicas, killed)
	start = time.Now()
	fmt.Fprintf(f.log, "  killed replica %s at %s\n", killed, start.UTC().Format(time.RFC3339Nano))
	if _, err := f.waitForFences(ctx, names, peers[1:], 3*time.Minute); err != nil {
		return sr, fmt.Errorf("the survivors take over %s's clusters: %w", killed, err)
	}
	sr.TakeoverSeconds = time.Since(start).Seconds()
	f.writeOwnHeap(fmt.Sprintf("fleet-%d-sharded", n))
	return sr, nil
}

// countIdleLeases counts the Lease requests of the split, and then of shardIdleWindow.
func (f *fleetRun) countIdleLeases(ctx context.Context, before tally, sr *shardedResult) error {
	split, err := f.hubRequests(ctx, onLeases)
	if err != nil {
		return err
	}
	sr.SplitLeaseRequests = split.since(before).total()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(shardIdleWindow):
	}
	idle, err := f.hubRequests(ctx, onLeases)
	if err != nil {
		return err
	}
	perMinute := idle.since(split)
	sr.IdleLeaseRequestsPerMinute = perMinute.total() / shardIdleWindow.Minutes()
	sr.IdleLeaseRequests = perMinute.per(shardIdleWindow.Minutes())
	return nil
}

// onLeases says whether a request of the hub's is on Leases.
func onLeases(labels map[string]string) bool { return labels["resource"] == "leases" }

// startReplica starts bin/vidra as one replica of a sharded operator, reading the hub's
// kubeconfig at kubeconfig, logging to <dir>/replica-<id>.log (appended to, so that a
// replica started again keeps what it logged before), with its metrics on metricsAddr
// ("0": none) and its profiles on pprofAddr ("": none).
func (b *bench) startReplica(id, kubeconfig string, resync time.Duration, metricsAddr, pprofAddr string) (*exec.Cmd, error) {
	logFile, err := os.OpenFile(filepath.Join(b.dir, "replica-"+id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	flags := []string{"--leader-election-namespace=" + namespace, "--sharding", "--shard-id=" + id,
		"--shard-lease-duration=" + shardLeaseDuration.String(), "--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=0", "--webhook-bind-address=0",
		// Each cluster changing hands is logged at info: when each moved, beside the figures.
		"--zap-log-level=info", "--zap-time-encoding=rfc3339nano"}
	if pprofAddr != "" {
		flags = append(flags, "--pprof-bind-address="+pprofAddr)
	}
	cmd := b.vidraCommand("replica-"+id, kubeconfig, resync, flags...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start replica %s (make build): %w", id, err)
	}
	// The child holds its own copy of the descriptor.
	_ = logFile.Close()
	return cmd, nil
}

// waitForFences waits until every cluster's fence Lease is held, live, by the peer
// rendezvous hashing places it on, and returns the holders.
func (f *fleetRun) waitForFences(ctx context.Context, clusters, peers []string, timeout time.Duration) (map[string]string, error) {
	want := map[string]string{}
	for _, c := range clusters {
		want[c] = sharding.OwnerAmong(c, peers)
	}
	var held map[string]string
	placed := 0
	err := testfleet.WaitFor(ctx, 500*time.Millisecond, timeout, "fences held as hashed", func() (bool, error) {
		var err error
		if held, err = f.fenceHolders(ctx); err != nil {
			return false, err
		}
		placed = 0
		for _, c := range clusters {
			if held[c] == want[c] {
				placed++
			}
		}
		return placed == len(clusters), nil
	})
	if err != nil {
		return held, fmt.Errorf("%d of %d fences held as hashed (%s): %w", placed, len(clusters), misplaced(clusters, want, held), err)
	}
	return held, nil
}

// misplaced names the first few clusters whose fence is not held by the peer hashing
// places them on, with who holds it: which to look for in the replicas' logs.
func misplaced(clusters []string, want, held map[string]string) string {
	var named []string
	for _, c := range clusters {
		if held[c] != want[c] && len(named) < 5 {
			named = append(named, fmt.Sprintf("%s held by %q, placed on %s", c, held[c], want[c]))
		}
	}
	return strings.Join(named, "; ")
}

// fenceHolders are the live holders of the clusters' fence Leases, by cluster.
func (f *fleetRun) fenceHolders(ctx context.Context) (map[string]string, error) {
	held, err := sharding.FenceHolders(ctx, f.fleet.Hub.Client, namespace)
	if err != nil {
		return nil, err
	}
	holders := map[string]string{}
	for lease, holder := range held {
		if cluster, ok := strings.CutPrefix(lease, sharding.FenceLeasePrefix+"-"); ok {
			holders[cluster] = holder
		}
	}
	return holders, nil
}

// replicaStopWait is how long a replica is given to stop after SIGTERM before it is sent
// SIGQUIT, which makes Go write every goroutine's stack to its log and exit: what held it
// is then on record. An operator stops in about a second; the chart gives it 30.
const replicaStopWait = 10 * time.Second

// stopReplicas stops the replicas side by side, each as stopReplica.
func (f *fleetRun) stopReplicas(replicas map[string]*exec.Cmd) {
	var wg sync.WaitGroup
	for id, cmd := range replicas {
		wg.Go(func() { f.stopReplica(id, cmd) })
	}
	wg.Wait()
}

// stopReplica stops a replica as stopProcess, once its process is waited for.
func (f *fleetRun) stopReplica(id string, cmd *exec.Cmd) {
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stopProcess(f.log, "replica "+id, cmd, exited)
}

// stopProcess sends a process (a replica, a Flux controller) SIGTERM, and SIGQUIT if it
// has not exited (exited is closed) replicaStopWait later, so that a stuck one leaves its
// stacks in its log; SIGKILL ends it if that did not.
func stopProcess(log io.Writer, id string, cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return
	case <-time.After(replicaStopWait):
	}
	fmt.Fprintf(log, "  %s has not stopped %s after SIGTERM: SIGQUIT, its goroutines are in its log\n", id, replicaStopWait)
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(replicaStopWait):
		_ = cmd.Process.Kill()
		<-exited
	}
}
