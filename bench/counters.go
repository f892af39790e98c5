package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// counters are what the operator did, read from its own metrics and /proc: the requests
// its clients made per API server and method (client-go's rest_client_requests_total),
// its reconciles of VidraResources, and its CPU time.
type counters struct {
	// requests by host ("127.0.0.1:port"), each by method.
	requests   map[string]tally
	reconciles float64
	// results are the reconciles by result (success, error, requeue, requeue_after).
	results tally
	// applies counts the objects applied, whatever the outcome (vidra_apply_total).
	applies    float64
	cpuSeconds float64
	gc         collector
}

// collector is what the operator's garbage collector did, from the Go runtime's metrics.
// (The runtime's estimate of the collector's CPU is left out: it counts the time its
// workers held a core as the Go scheduler saw it, which on a machine shared with the
// control planes is far more than the CPU they got. A CPU profile says what it cost.)
type collector struct {
	cycles         float64
	allocatedBytes float64
	// liveBytes is the heap the last cycle found live (a gauge, not a count).
	liveBytes float64
}

func (c collector) since(before collector) collector {
	return collector{cycles: c.cycles - before.cycles, allocatedBytes: c.allocatedBytes - before.allocatedBytes, liveBytes: c.liveBytes}
}

// plus adds two deltas; the live heap is the later one's.
func (c collector) plus(o collector) collector {
	return collector{cycles: c.cycles + o.cycles, allocatedBytes: c.allocatedBytes + o.allocatedBytes, liveBytes: o.liveBytes}
}

// read records a series of the Go runtime's metrics, if it is one the collector counts.
func (c *collector) read(series string, v float64) {
	switch series {
	case "go_gc_cycles_total_gc_cycles_total":
		c.cycles = v
	case "go_gc_heap_allocs_bytes_total":
		c.allocatedBytes = v
	case "go_gc_heap_live_bytes":
		c.liveBytes = v
	}
}

// counters reads the operator's counters.
func (b *bench) counters(ctx context.Context) (counters, error) {
	c := counters{requests: map[string]tally{}, results: tally{}}
	cpu, err := processCPUSeconds(b.operator.Process.Pid)
	if err != nil {
		return c, err
	}
	c.cpuSeconds = cpu
	err = b.readMetrics(ctx, func(series string, v float64) {
		switch {
		case strings.HasPrefix(series, "rest_client_requests_total{"):
			labels := parseLabels(series)
			host := labels["host"]
			if c.requests[host] == nil {
				c.requests[host] = tally{}
			}
			c.requests[host][labels["method"]] += v
		case strings.HasPrefix(series, "controller_runtime_reconcile_total{") && parseLabels(series)["controller"] == "vidraresource":
			c.reconciles += v
			c.results[parseLabels(series)["result"]] += v
		case strings.HasPrefix(series, "vidra_apply_total{"):
			c.applies += v
		default:
			c.gc.read(series, v)
		}
	})
	return c, err
}

// since is what the operator did between before and c.
func (c counters) since(before counters) counters {
	d := counters{requests: map[string]tally{}, reconciles: c.reconciles - before.reconciles,
		results: c.results.since(before.results), cpuSeconds: c.cpuSeconds - before.cpuSeconds, gc: c.gc.since(before.gc)}
	for host, methods := range c.requests {
		d.requests[host] = methods.since(before.requests[host])
	}
	return d
}

// plus adds two deltas.
func (c counters) plus(o counters) counters {
	sum := counters{requests: map[string]tally{}, reconciles: c.reconciles + o.reconciles,
		results: c.results.added(o.results), cpuSeconds: c.cpuSeconds + o.cpuSeconds, gc: c.gc.plus(o.gc)}
	for _, part := range []counters{c, o} {
		for host, methods := range part.requests {
			sum.requests[host] = sum.requests[host].added(methods)
		}
	}
	return sum
}

// to counts the requests to the clusters, all methods or only writes.
func (c counters) to(clusters []*testfleet.Cluster, writesOnly bool) float64 {
	var n float64
	for _, cl := range clusters {
		for m, v := range c.requests[hostOf(cl)] {
			if !writesOnly || m != http.MethodGet {
				n += v
			}
		}
	}
	return n
}

// byMethod counts the requests to the clusters by method.
func (c counters) byMethod(clusters []*testfleet.Cluster) tally {
	n := tally{}
	for _, cl := range clusters {
		n = n.added(c.requests[hostOf(cl)])
	}
	return n
}

func hostOf(c *testfleet.Cluster) string {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return c.Config.Host
	}
	return u.Host
}

// parseLabels reads the labels of a Prometheus text series: name{a="x",b="y"}.
func parseLabels(series string) map[string]string {
	labels := map[string]string{}
	_, rest, _ := strings.Cut(series, "{")
	rest = strings.TrimSuffix(rest, "}")
	for pair := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if ok {
			labels[k] = strings.Trim(v, `"`)
		}
	}
	return labels
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times; it is 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// processCPUSeconds is the user and system CPU time of a process.
func processCPUSeconds(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields are counted after its closing parenthesis.
	_, rest, ok := cutLast(string(stat), ")")
	if !ok {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// selfCPUSeconds is this process's user and system CPU time.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// hubWrites counts the write requests the hub's API server served on VidraResources
// (status, finalizers), Events and ControllerRevisions (the revision history): what reconciling VidraResources costs the hub, without
// the VidraCluster probes or the bench's own requests (it creates the VidraResources).
func (b *bench) hubWrites(ctx context.Context) (tally, error) {
	return b.hubRequests(ctx, reconcileWrite)
}

// reconcileWrite says whether a request of the hub's is a write of reconciling
// VidraResources.
func reconcileWrite(labels map[string]string) bool {
	// The bench creates the VidraResources (POST): the operator only changes them.
	switch labels["resource"] {
	case "vidraresources":
		return isWrite(labels["verb"]) && labels["verb"] != "POST"
	case "events", "controllerrevisions":
		return isWrite(labels["verb"])
	}
	return false
}

// anyWrite says whether a request of the hub's is a write, of anything.
func anyWrite(labels map[string]string) bool { return isWrite(labels["verb"]) }

// anyList says whether a request of the hub's is a LIST or a WATCH, of anything.
func anyList(labels map[string]string) bool {
	return labels["verb"] == "LIST" || labels["verb"] == "WATCH"
}

func isWrite(verb string) bool {
	return slices.Contains([]string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}, verb)
}

// hubRequests counts the requests the hub's API server served that counted says count,
// by verb and resource ("PATCH vidraresources/status").
func (b *bench) hubRequests(ctx context.Context, counted func(labels map[string]string) bool) (tally, error) {
	n := tally{}
	rc, err := rest.RESTClientFor(withCodec(rest.CopyConfig(b.fleet.Hub.Config)))
	if err != nil {
		return n, err
	}
	body, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return n, fmt.Errorf("hub metrics: %w", err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		series, value, ok := cutLast(line, " ")
		if !ok || !strings.HasPrefix(series, "apiserver_request_total{") {
			continue
		}
		labels := parseLabels(series)
		if !counted(labels) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			what := labels["verb"] + " " + labels["resource"]
			if labels["subresource"] != "" {
				what += "/" + labels["subresource"]
			}
			n[what] += v
		}
	}
	return n, nil
}

// tally counts requests by what they were: writes by verb and resource
// ("PATCH vidraresources/status"), requests by method.
type tally map[string]float64

func (h tally) total() float64 {
	var n float64
	for _, v := range h {
		n += v
	}
	return n
}

// since is what was written after before; added adds another such delta.
func (h tally) since(before tally) tally {
	d := tally{}
	for k, v := range h {
		if v-before[k] != 0 {
			d[k] = v - before[k]
		}
	}
	return d
}

// split is the counts whose key in says so, and the others.
func (h tally) split(in func(key string) bool) (matching, others tally) {
	matching, others = tally{}, tally{}
	for k, v := range h {
		if in(k) {
			matching[k] = v
		} else {
			others[k] = v
		}
	}
	return matching, others
}

func (h tally) added(o tally) tally {
	sum := tally{}
	for _, part := range []tally{h, o} {
		for k, v := range part {
			sum[k] += v
		}
	}
	return sum
}

// per divides every count by n, for "PATCH vidraresources/status 1.00, POST events 1.00".
func (h tally) per(n float64) string {
	keys := slices.Sorted(maps.Keys(h))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, h[k]/n))
	}
	return strings.Join(parts, ", ")
}

func withCodec(cfg *rest.Config) *rest.Config {
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// controlPlaneCPUSeconds is the CPU time of the kube-apiservers serving the clusters and
// of their etcds.
func controlPlaneCPUSeconds(clusters []*testfleet.Cluster) (float64, error) {
	pids, err := controlPlanePIDs(clusters)
	if err != nil {
		return 0, err
	}
	var total float64
	for _, pid := range pids {
		if cpu, err := processCPUSeconds(pid); err == nil {
			total += cpu
		}
	}
	return total, nil
}

// controlPlanePIDs finds the kube-apiserver serving each cluster and its etcd by their
// command lines: the apiserver's --secure-port is the cluster's port, its --etcd-servers
// names the etcd's client URL.
func controlPlanePIDs(clusters []*testfleet.Cluster) ([]int, error) {
	ports := map[string]bool{}
	for _, c := range clusters {
		_, port, _ := strings.Cut(hostOf(c), ":")
		ports[port] = true
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	etcds := map[string]bool{}
	var pids []int
	cmdlines := map[int][]string{}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		cmdlines[pid] = args
		if !strings.HasSuffix(args[0], "kube-apiserver") {
			continue
		}
		var port, etcd string
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
				port = v
			}
			if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
				etcd = v
			}
		}
		if ports[port] {
			etcds[etcd] = true
			pids = append(pids, pid)
		}
	}
	for pid, args := range cmdlines {
		if !strings.HasSuffix(args[0], "etcd") {
			continue
		}
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--listen-client-urls="); ok && etcds[v] {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}
