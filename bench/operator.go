package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const namespace = "vidra-system"

// pollEvery is how often what the bench times is looked at: fine enough for latencies of
// tens of milliseconds.
const pollEvery = 10 * time.Millisecond

// bench is one run: the fleet, the operator process and its metrics.
type bench struct {
	settings
	root     string
	fleet    *testfleet.Fleet
	members  []*testfleet.Cluster
	spare    *testfleet.Cluster
	log      io.Writer
	operator *exec.Cmd
	metrics  string
	// pprof is the operator's /debug/pprof base URL; dir keeps its log and heap profiles.
	pprof string
	dir   string
	// profiler, when set, records CPU profiles during each workload.
	profiler *profiler
	// cpus are the CPUs the workloads placed apart split; nil (and why) when they cannot.
	cpus    *cpus
	cpusErr error
	// fluxBuilds are Flux's controllers, built when the fluxrace phase runs.
	fluxBuilds []fluxBuild
}

func (b *bench) startOperator(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "vidra-bench-")
	if err != nil {
		return err
	}
	b.dir = dir
	if err := b.fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	if err := b.installFinalizerPolicy(ctx); err != nil {
		return err
	}
	if err := b.logControllerRuntime(); err != nil {
		return err
	}
	return b.launchOperator(ctx, "vidra", b.WorkloadResync)
}

// launchOperator starts bin/vidra against the hub, resyncing every VidraResource at the
// interval given, with more flags, logging to <dir>/<label>.log, and returns once its
// metrics answer.
func (b *bench) launchOperator(ctx context.Context, label string, resync time.Duration, flags ...string) error {
	kubeconfig, err := b.fleet.Hub.WriteKubeconfig(b.dir)
	if err != nil {
		return err
	}
	addr, err := testfleet.FreeLocalAddress()
	if err != nil {
		return err
	}
	b.metrics = "http://" + addr + "/metrics"
	pprofAddr, err := testfleet.FreeLocalAddress()
	if err != nil {
		return err
	}
	b.pprof = "http://" + pprofAddr + "/debug/pprof"
	logFile, err := os.Create(filepath.Join(b.dir, label+".log"))
	if err != nil {
		return err
	}
	fmt.Fprintf(b.log, "operator log: %s\noperator profiles: %s (go tool pprof %s/profile?seconds=20)\n", logFile.Name(), b.pprof, b.pprof)
	b.operator = b.vidraCommand(label, kubeconfig, resync,
		append([]string{"--metrics-bind-address=" + addr, "--health-probe-bind-address=0", "--pprof-bind-address=" + pprofAddr}, flags...)...)
	b.operator.Stdout, b.operator.Stderr = logFile, logFile
	b.operator.Env = withProfileRate(os.Environ())
	if err := b.operator.Start(); err != nil {
		return fmt.Errorf("start bin/vidra (make build): %w", err)
	}
	return testfleet.WaitFor(ctx, pollEvery, 30*time.Second, "operator metrics", func() (bool, error) {
		_, err := b.scrape(ctx)
		return err == nil, err
	})
}

// heapProfileRate is how many bytes the operator allocates per sample of its heap
// profiles, an eighth of Go's default: what the bench reads from them (the Events
// recorder's share of the heap, a megabyte at 100 clusters) is then counted within about
// a quarter at 100 clusters and a tenth at 1,000, for about 1% of the operator's CPU
// and a little of its RSS (the profile's records, off the heap).
const heapProfileRate = 64 << 10

// withProfileRate is env with the operator's heap profile rate, unless env sets one.
func withProfileRate(env []string) []string {
	for i, kv := range env {
		if godebug, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if strings.Contains(godebug, "memprofilerate=") {
				return env
			}
			env[i] = fmt.Sprintf("%s,memprofilerate=%d", kv, heapProfileRate)
			return env
		}
	}
	return append(env, fmt.Sprintf("GODEBUG=memprofilerate=%d", heapProfileRate))
}

// vidraCommand is bin/vidra named name against the hub as the bench runs it, with more
// flags. Its source cache is a directory of the run's, one per name, as the chart's is
// one per pod: a process the bench kills leaves it to the next of that name, which
// empties it, where a temporary one of its own would stay behind in $TMPDIR.
func (b *bench) vidraCommand(name, kubeconfig string, resync time.Duration, flags ...string) *exec.Cmd {
	args := append([]string{"--kubeconfig=" + kubeconfig, "--hub-id=bench", "--cluster-secret-namespace=" + namespace,
		"--source-cache-dir=" + filepath.Join(b.dir, "sources-"+name),
		"--max-concurrent-reconciles=" + strconv.Itoa(b.Workers),
		"--max-concurrent-reconciles-per-cluster=" + strconv.Itoa(b.PerClusterWorkers), "--resync-interval=" + resync.String(), "--zap-log-level=error"}, append(inventoryFlags, flags...)...)
	return exec.Command(filepath.Join(b.root, "bin", "vidra"), args...)
}

// restartOperator stops the operator and starts a new one, with more flags: figures that
// follow are measured from a fresh process.
func (b *bench) restartOperator(ctx context.Context, label string, resync time.Duration, flags ...string) error {
	b.stopOperator()
	return b.launchOperator(ctx, label, resync, flags...)
}

// restartSettled restarts the operator and waits until it has applied every object the
// VidraResources on the hub manage, and gone quiet: what follows is not its start (whose
// first apply of each object, with nothing remembered yet, writes it).
func (b *bench) restartSettled(ctx context.Context, label string, resync time.Duration) error {
	if err := b.restartOperator(ctx, label, resync); err != nil {
		return err
	}
	var vrs vidrav1alpha1.VidraResourceList
	if err := b.fleet.Hub.Client.List(ctx, &vrs); err != nil {
		return err
	}
	managed := 0
	for _, vr := range vrs.Items {
		managed += len(vr.Status.ManagedResources)
	}
	last, quietSince := -1.0, time.Now()
	return testfleet.WaitFor(ctx, 500*time.Millisecond, 5*time.Minute, "the restarted operator quiet", func() (bool, error) {
		c, err := b.counters(ctx)
		if err != nil {
			return false, err
		}
		if c.reconciles != last {
			last, quietSince = c.reconciles, time.Now()
		}
		return c.applies >= float64(managed) && time.Since(quietSince) >= 2*time.Second, nil
	})
}

// installFinalizerPolicy installs the chart's MutatingAdmissionPolicy on the hub, as
// `helm install` does, rendered by helm ($HELM, else bin/tools/helm-*): the operator is
// measured as the chart installs it.
func (b *bench) installFinalizerPolicy(ctx context.Context) error {
	helm := os.Getenv("HELM")
	if helm == "" {
		found, _ := filepath.Glob(filepath.Join(b.root, "bin", "tools", "helm-*"))
		if len(found) == 0 {
			return fmt.Errorf("no helm: set HELM, or run make helm")
		}
		helm = found[0]
	}
	cmd := exec.CommandContext(ctx, helm, "template", "bench", filepath.Join(b.root, "charts", "vidra"),
		"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", "--show-only", "templates/admissionpolicy.yaml",
		"--kube-version", testfleet.KubeVersion)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+b.dir, "HELM_CONFIG_HOME="+b.dir, "HELM_DATA_HOME="+b.dir)
	rendered, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("helm template the finalizer policy: %w", err)
	}
	if _, err := b.fleet.Hub.Kubectl(ctx, rendered, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("install the finalizer policy: %w", err)
	}
	return nil
}

func (b *bench) stopOperator() {
	_ = testfleet.Terminate(b.operator, 30*time.Second)
}

// memory is the operator's: heapMiB is the heap's spans in use, liveHeapMiB the objects
// in them (after a garbage collection, what is reachable); peakRSSMiB the most its
// resident set has been since it started; eventsHeapMiB the part of the live heap that
// its Events recorder holds (from the heap profile settled saves).
type memory struct{ rssMiB, peakRSSMiB, heapMiB, liveHeapMiB, eventsHeapMiB, goroutines float64 }

func (b *bench) memory(ctx context.Context) (memory, error) {
	var m memory
	var err error
	if m.rssMiB, m.peakRSSMiB, err = processRSSMiB(b.operator.Process.Pid); err != nil {
		return m, err
	}
	values, err := b.scrape(ctx)
	if err != nil {
		return m, err
	}
	m.heapMiB = values["go_memstats_heap_inuse_bytes"] / (1 << 20)
	m.liveHeapMiB = values["go_memstats_heap_alloc_bytes"] / (1 << 20)
	m.goroutines = values["go_goroutines"]
	return m, nil
}

// processRSSMiB is a process's resident set, and the most it has been since the
// process started.
func processRSSMiB(pid int) (rss, peak float64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	fields := []struct {
		prefix string
		into   *float64
	}{{"VmRSS:", &rss}, {"VmHWM:", &peak}}
	for line := range strings.SplitSeq(string(status), "\n") {
		for _, field := range fields {
			if rest, ok := strings.CutPrefix(line, field.prefix); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				if err != nil {
					return 0, 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
				}
				*field.into = kb / 1024
			}
		}
	}
	return rss, peak, nil
}

// settled measures memory once it has been still for a moment: the operator's own
// start-up or last burst of work is not what is measured. The heap is measured live,
// after two garbage collections: the first leaves what sync.Pools hold (a gzip writer
// of 650 KB for each revision recorded at once, or metrics scrape) to the second, as an
// operator left alone frees it within minutes. Its profile is kept as
// <dir>/heap-<label>.pprof, and the operator's goroutines, grouped by stack, as
// <dir>/goroutines-<label>.txt, listed first so that the heap is read last.
func (b *bench) settled(ctx context.Context, label string) (memory, error) {
	time.Sleep(3 * time.Second)
	if err := b.saveProfile(ctx, "goroutine?debug=1", "goroutines-"+label+".txt"); err != nil {
		return memory{}, err
	}
	heap := "heap-" + label + ".pprof"
	for range 2 {
		if err := b.saveProfile(ctx, "heap?gc=1", heap); err != nil {
			return memory{}, err
		}
	}
	m, err := b.memory(ctx)
	if err != nil {
		return m, err
	}
	events, err := heapHeldUnder(filepath.Join(b.dir, heap), eventsRecorder)
	m.eventsHeapMiB = float64(events) / (1 << 20)
	return m, err
}

// saveProfile saves the operator's profile at path (under /debug/pprof) as file.
func (b *bench) saveProfile(ctx context.Context, path, file string) error {
	return saveProfileOf(ctx, b.pprof, path, filepath.Join(b.dir, file))
}

// saveProfileOf saves the profile at path under base (a process's /debug/pprof) as file.
func saveProfileOf(ctx context.Context, base, path, file string) error {
	resp, err := httpGet(ctx, base+"/"+path)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	profile, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	return os.WriteFile(file, profile, 0o600)
}

// scrape reads the operator's unlabeled metrics.
func (b *bench) scrape(ctx context.Context) (map[string]float64, error) {
	return scrapeAt(ctx, b.metrics)
}

// scrapeAt reads the unlabeled metrics served at url.
func scrapeAt(ctx context.Context, url string) (map[string]float64, error) {
	values := map[string]float64{}
	err := readMetricsAt(ctx, url, func(series string, v float64) {
		if !strings.Contains(series, "{") {
			values[series] = v
		}
	})
	return values, err
}

// readMetrics reads the operator's metrics, giving each series (its name and labels as
// written) and its value to each; comments and what does not parse are skipped.
func (b *bench) readMetrics(ctx context.Context, each func(series string, v float64)) error {
	return readMetricsAt(ctx, b.metrics, each)
}

// readMetricsAt is readMetrics of the metrics served at url.
func readMetricsAt(ctx context.Context, url string, each func(series string, v float64)) error {
	resp, err := httpGet(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		series, value, ok := cutLast(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			each(series, v)
		}
	}
	return scanner.Err()
}

// enroll creates the labeled kubeconfig Secret of a member and returns when its
// VidraCluster shows Engaged, with the time that took.
func (b *bench) enroll(ctx context.Context, m *testfleet.Cluster) (time.Duration, error) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: namespace, Labels: map[string]string{vidrav1alpha1.ClusterLabel: m.Name}},
		Data:       map[string][]byte{vidrav1alpha1.KubeconfigKey: m.Kubeconfig},
	}
	start := time.Now()
	if err := b.fleet.Hub.Client.Create(ctx, secret); err != nil {
		return 0, err
	}
	err := testfleet.WaitFor(ctx, pollEvery, 60*time.Second, m.Name+" Engaged", func() (bool, error) {
		vc := &vidrav1alpha1.VidraCluster{}
		err := b.fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: m.Name}, vc)
		return err == nil && vc.Status.Phase == vidrav1alpha1.ClusterEngaged, err
	})
	return time.Since(start), err
}

// retire deletes a member's Secret and returns once its VidraCluster is gone.
func (b *bench) retire(ctx context.Context, m *testfleet.Cluster) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: namespace}}
	if err := b.fleet.Hub.Client.Delete(ctx, secret); err != nil {
		return err
	}
	return testfleet.WaitFor(ctx, pollEvery, 60*time.Second, m.Name+" disengaged", func() (bool, error) {
		err := b.fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: m.Name}, &vidrav1alpha1.VidraCluster{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func percentile(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)*p/100, len(s)-1)].Microseconds()) / 1000
}

// httpGet GETs url; the caller closes the body.
func httpGet(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

// logControllerRuntime sends what controller-runtime logs in the bench's process outside
// the pull agents' own loggers (sources, caches) to agents.log, for the whole run: it
// takes the first logger set, and none set within 30 s of its first use.
func (b *bench) logControllerRuntime() error {
	logFile, err := os.Create(filepath.Join(b.dir, "agents.log"))
	if err != nil {
		return err
	}
	ctrllog.SetLogger(crzap.New(crzap.WriteTo(logFile), crzap.Level(zapcore.InfoLevel)))
	return nil
}
