package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// A replica that exited on its own is started again after a back-off that doubles from
// replicaFirstBackoff to replicaMostBackoff, and starts over once the replica has run
// replicaBackoffReset: a kubelet's, ten times faster (a replica started while the hub is
// down exits at once).
const (
	replicaFirstBackoff = time.Second
	replicaMostBackoff  = 16 * time.Second
	replicaBackoffReset = 30 * time.Second
)

// replicaSet runs the operator's replicas of the faults phase and starts again any that
// exits on its own, as a kubelet restarts a container; a replica the schedule killed stays
// down until every fault that holds it down is undone.
type replicaSet struct {
	f *faultsRun
	// kubeconfig is the hub's, written once for every start.
	kubeconfig string
	mu         sync.Mutex
	replicas   []*replica
	// exits counts the replicas that exited on their own.
	exits   int
	stopped bool
}

// replica is one replica: its addresses stay the same across restarts.
type replica struct {
	id, metrics, pprof string
	cmd                *exec.Cmd
	// down counts the faults holding it down; exited is closed when cmd has exited.
	down   int
	exited chan struct{}
	killed bool
	// started is when cmd started; backoff the wait before the next start on its own.
	started time.Time
	backoff time.Duration
}

// replicaAddress is the i-th replica's address for its metrics or profiles: an IP of
// its own in the loopback range, on a port outside the ephemeral range, so that no
// connection of the run takes the port while the replica is down.
func replicaAddress(i, port int) string { return fmt.Sprintf("127.78.0.%d:%d", i+1, port) }

// add starts a new replica, the i-th.
func (rs *replicaSet) add(i int, id string) error {
	r := &replica{id: id, metrics: replicaAddress(i, 8080), pprof: replicaAddress(i, 6060)}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.replicas = append(rs.replicas, r)
	fmt.Fprintf(rs.f.log, "replica log: %s\n", filepath.Join(rs.f.dir, "replica-"+id+".log"))
	return rs.startLocked(r)
}

func (rs *replicaSet) startLocked(r *replica) error {
	cmd, err := rs.f.startReplica(r.id, rs.kubeconfig, rs.f.WorkloadResync, r.metrics, r.pprof)
	if err != nil {
		return err
	}
	r.cmd, r.exited, r.killed, r.started = cmd, make(chan struct{}), false, time.Now()
	go rs.supervise(r, cmd, r.exited)
	return nil
}

// supervise waits for cmd to exit; unless the schedule killed it, it is started again.
func (rs *replicaSet) supervise(r *replica, cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	close(exited)
	if r.killed || rs.stopped || r.cmd != cmd {
		return
	}
	rs.exits++
	if time.Since(r.started) > replicaBackoffReset || r.backoff == 0 {
		r.backoff = replicaFirstBackoff
	} else {
		r.backoff = min(2*r.backoff, replicaMostBackoff)
	}
	wait := r.backoff
	rs.f.history.record("replica %s exited on its own (%v); started again in %s", r.id, err, wait)
	go func() {
		time.Sleep(wait)
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.stopped || r.down > 0 || r.cmd != cmd {
			return
		}
		if err := rs.startLocked(r); err != nil {
			rs.f.history.record("replica %s not started again: %v", r.id, err)
		}
	}()
}

// kill holds replica i down (SIGKILL if it runs) until as many revive calls.
func (rs *replicaSet) kill(i int) {
	rs.mu.Lock()
	r := rs.replicas[i]
	r.down++
	var exited chan struct{}
	if r.down == 1 && r.cmd != nil && !r.killed {
		r.killed = true
		_ = r.cmd.Process.Kill()
		exited = r.exited
	}
	rs.mu.Unlock()
	if exited != nil {
		<-exited
	}
}

// revive undoes one kill; the last one starts the replica again.
func (rs *replicaSet) revive(i int) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.replicas[i]
	r.down--
	if r.down > 0 || rs.stopped {
		return nil
	}
	select {
	case <-r.exited:
	default:
		return nil // it runs: it exited on its own and was started again meanwhile
	}
	return rs.startLocked(r)
}

// stopAll stops every replica, as stopReplica does, and starts none again.
func (rs *replicaSet) stopAll() {
	rs.mu.Lock()
	rs.stopped = true
	var wg sync.WaitGroup
	for _, r := range rs.replicas {
		if r.cmd == nil {
			continue
		}
		select {
		case <-r.exited:
			continue
		default:
		}
		wg.Go(func() { stopProcess(rs.f.log, "replica "+r.id, r.cmd, r.exited) })
	}
	rs.mu.Unlock()
	wg.Wait()
}

// usage is replica i's goroutines and heap in use, read after a garbage collection (a
// heap profile with gc=1 makes one), and when its process started.
func (rs *replicaSet) usage(ctx context.Context, i int) (goroutines, heapMiB float64, started time.Time, err error) {
	rs.mu.Lock()
	r := rs.replicas[i]
	started = r.started
	rs.mu.Unlock()
	if err := collectGarbage(ctx, r.pprof); err != nil {
		return 0, 0, started, fmt.Errorf("replica %s: %w", r.id, err)
	}
	values, err := scrapeAt(ctx, "http://"+r.metrics+"/metrics")
	if err != nil {
		return 0, 0, started, fmt.Errorf("replica %s: %w", r.id, err)
	}
	return values["go_goroutines"], values["go_memstats_heap_inuse_bytes"] / (1 << 20), started, nil
}

// collectGarbage asks the process whose profiles are at pprofAddr for its heap profile
// after a collection, and drops it.
func collectGarbage(ctx context.Context, pprofAddr string) error {
	resp, err := httpGet(ctx, "http://"+pprofAddr+"/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// leads says whether replica i is the leader now, as its metrics tell.
func (rs *replicaSet) leads(ctx context.Context, i int) (bool, error) {
	rs.mu.Lock()
	r := rs.replicas[i]
	rs.mu.Unlock()
	leads := false
	err := readMetricsAt(ctx, "http://"+r.metrics+"/metrics", func(series string, v float64) {
		if strings.HasPrefix(series, "leader_election_master_status{") && v == 1 {
			leads = true
		}
	})
	return leads, err
}

// makeLeader holds every other replica down until replica i leads (a Lease left by a
// killed leader lasts --leader-election-lease-duration), then starts them again.
func (rs *replicaSet) makeLeader(ctx context.Context, i int) error {
	if leads, err := rs.leads(ctx, i); err == nil && leads {
		return nil
	}
	for j := range rs.replicas {
		if j != i {
			rs.kill(j)
		}
	}
	err := testfleet.WaitFor(ctx, time.Second, 2*time.Minute, "replica "+rs.replicas[i].id+" the leader", func() (bool, error) {
		leads, err := rs.leads(ctx, i)
		return err == nil && leads, nil
	})
	for j := range rs.replicas {
		if j != i {
			err = errors.Join(err, rs.revive(j))
		}
	}
	return err
}

// dumpGoroutines saves every running replica's goroutines, with their stacks and how
// long each has waited, as replica-<id>-goroutines-<label>.txt: what holds a bundle that
// does not converge.
func (rs *replicaSet) dumpGoroutines(ctx context.Context, label string) {
	rs.mu.Lock()
	replicas := append([]*replica(nil), rs.replicas...)
	rs.mu.Unlock()
	for _, r := range replicas {
		file := filepath.Join(rs.f.dir, "replica-"+r.id+"-goroutines-"+label+".txt")
		if err := saveProfileOf(ctx, "http://"+r.pprof+"/debug/pprof", "goroutine?debug=2", file); err != nil {
			rs.f.history.record("goroutines of replica %s: %v", r.id, err)
			continue
		}
		rs.f.history.record("goroutines of replica %s saved to %s", r.id, file)
	}
}
