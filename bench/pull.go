package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/identity"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
	"github.com/vidra-operator/vidra/operator"
)

// The pull phase: pull clusters whose agents run in the bench process, each against a
// member control plane of the fleet with its own ServiceAccount's token there, as the
// agent's pod would, and against the hub with the token enrollment gave it.
const (
	// pullBundles are the VidraResources delivered to each pull cluster, of -objects
	// ConfigMaps each, in pullNamespace: the only namespace its delivery identity may write.
	pullBundles   = 2
	pullNamespace = "bench-pull"
	// pullSettle is how long the pull clusters are left after their bundles are Ready,
	// before the idle agents' requests are counted.
	pullSettle = 5 * time.Second
	// defaultHeartbeat is the binary's --agent-heartbeat, which the idle figures are
	// normalised to.
	defaultHeartbeat = 30 * time.Second
	// pullTokenTTL is the lifetime of the agents' hub tokens: kubectl vidra enroll
	// --pull's default.
	pullTokenTTL = 7 * 24 * time.Hour
	// heartbeatKind is what an agent's heartbeat is, as hubCount counts requests.
	heartbeatKind = "update leases"
)

// pullResult is what the pull phase measured.
type pullResult struct {
	// Setup says how the pull clusters were made.
	Setup             string  `json:"setup"`
	Clusters          int     `json:"clusters"`
	BundlesPerCluster int     `json:"bundlesPerCluster"`
	HeartbeatSeconds  float64 `json:"agentHeartbeatSeconds"`
	IdleSeconds       float64 `json:"idleWindowSeconds"`
	// IdleRequestsPerMinute are the requests the idle agents made to the hub, per agent
	// and minute, at the bench's heartbeat, counted at each agent's hub client; ByKind
	// breaks them down by verb and resource ("update leases" is the heartbeat).
	IdleRequestsPerMinute       float64 `json:"idleHubRequestsPerMemberPerMinute"`
	IdleRequestsPerMinuteByKind string  `json:"idleHubRequestsPerMemberPerMinuteByKind"`
	// The same, normalised to the default 30s heartbeat: the heartbeats scaled by
	// heartbeat/30s, every other request as counted.
	IdleRequestsPerMinuteAtDefault       float64 `json:"idleHubRequestsPerMemberPerMinuteAt30s"`
	IdleRequestsPerMinuteAtDefaultByKind string  `json:"idleHubRequestsPerMemberPerMinuteAt30sByKind"`
	// IdleOtherRequestsPerMinute are those that are neither a watch nor a heartbeat.
	IdleOtherRequestsPerMinute float64 `json:"idleHubRequestsOtherThanWatchOrHeartbeatPerMemberPerMinute"`
	// IdleHubWritesPerMinute are the writes the hub's API server made meanwhile to the
	// pull clusters' objects (their VidraClusters, heartbeat Leases, VidraBundles and
	// VidraResources), whoever made them, per cluster and minute at the bench's heartbeat:
	// seen as the watch events of those objects.
	IdleHubWritesPerMinute       float64 `json:"idleHubWritesPerMemberPerMinute"`
	IdleHubWritesPerMinuteByKind string  `json:"idleHubWritesPerMemberPerMinuteByKind"`
	// TokenRenewalMinutes is how often an agent renews its hub token, from the token's
	// lifetime and the agent's renewal point: rarer than the idle window, so not counted
	// in it.
	TokenTTLMinutes     float64 `json:"agentTokenTTLMinutes"`
	TokenRenewalMinutes float64 `json:"agentTokenRenewalEveryMinutes"`
	// Change to Ready: a hub VidraResource's manifest changed, until the hub shows it
	// Ready for the new generation, as the agent reports it.
	Changes            int     `json:"changes"`
	ChangeToReadyP50Ms float64 `json:"changeToReadyP50Ms"`
	ChangeToReadyP90Ms float64 `json:"changeToReadyP90Ms"`
	ChangeToReadyMaxMs float64 `json:"changeToReadyMaxMs"`
	// RequestsPerChangeByKind are the agents' requests to the hub per change.
	RequestsPerChange       float64 `json:"hubRequestsPerChange"`
	RequestsPerChangeByKind string  `json:"hubRequestsPerChangeByKind"`
}

// pullAgent is one pull cluster and its agent.
type pullAgent struct {
	cluster string
	count   *hubCount
	stop    context.CancelFunc
	agent   *testoperator.Operator
	log     *os.File
	// secret enrolled the cluster; deleted once the phase is done.
	secret *corev1.Secret
}

// measurePull enrolls pull clusters, runs their agents, delivers a few bundles to each,
// counts what the idle agents ask of the hub, then times changes on the hub until the
// hub shows them Ready.
func (b *bench) measurePull(ctx context.Context, r *results) error {
	n := min(b.PullMembers, len(b.members))
	if n < 1 {
		return errors.New("no member to run a pull agent on (-pull-members)")
	}
	pr := &pullResult{Clusters: n, BundlesPerCluster: pullBundles, HeartbeatSeconds: b.PullHeartbeat.Seconds(), IdleSeconds: b.PullIdle.Seconds(),
		TokenTTLMinutes: pullTokenTTL.Minutes(), TokenRenewalMinutes: pullTokenTTL.Minutes() * operator.DefaultOptions().AgentTokenRenewalPoint}
	pr.Setup = fmt.Sprintf("%d pull clusters, each the agent of one member control plane (%s), run in the bench process by operator.NewAgent with --agent-heartbeat %s and --resync-interval %s, with its ServiceAccount's token on the member and its enrollment token on the hub; the hub operator is bin/vidra",
		n, strings.Join(memberNames(b.members[:n]), ", "), b.PullHeartbeat, b.Resync)
	if b.runs("enroll") {
		pr.Setup += "; the same members are enrolled in push mode under their own names"
	}
	fmt.Fprintf(b.log, "  agent logs: %s\n", filepath.Join(b.dir, "agent-*.log"))
	agents := make([]*pullAgent, 0, n)
	defer func() {
		for _, a := range agents {
			a.stop()
			select {
			case <-a.agent.Stopped:
			case <-time.After(30 * time.Second):
			}
			_ = a.log.Close()
			// Unenrolled, lest its agent's silence turn it Unreachable (a hub write) in the
			// middle of a later phase's idle window.
			_ = b.fleet.Hub.Client.Delete(context.WithoutCancel(ctx), a.secret)
		}
	}()
	for _, m := range b.members[:n] {
		a, err := b.startPullAgent(ctx, m, pullNamespace, nil)
		if err != nil {
			return err
		}
		agents = append(agents, a)
	}
	for _, a := range agents {
		if err := testfleet.WaitFor(ctx, 100*time.Millisecond, 60*time.Second, "pull cluster "+a.cluster+" Engaged", func() (bool, error) {
			vc := &vidrav1alpha1.VidraCluster{}
			err := b.fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: a.cluster}, vc)
			return err == nil && vc.Status.Mode == vidrav1alpha1.ClusterModePull && vc.Status.Phase == vidrav1alpha1.ClusterEngaged, client.IgnoreNotFound(err)
		}); err != nil {
			return err
		}
	}

	// A few bundles to each, bundle after bundle so that consecutive changes go to
	// different clusters.
	var names []string
	for i := range pullBundles {
		for _, a := range agents {
			name := fmt.Sprintf("%s-%d", a.cluster, i)
			vr := &vidrav1alpha1.VidraResource{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: vidrav1alpha1.VidraResourceSpec{
					Destination: vidrav1alpha1.Destination{Cluster: a.cluster, Namespace: pullNamespace, ReconcileOnEvents: true},
					Manifest:    pullManifest(name, b.Objects, "v"),
				},
			}
			// Right after the hub started, its MutatingAdmissionPolicy (the finalizer's)
			// may not know the kind yet, and refuses it as unavailable for a moment.
			var created error
			if err := testfleet.WaitFor(ctx, 100*time.Millisecond, 30*time.Second, "VidraResource "+name+" created on the hub", func() (bool, error) {
				created = b.fleet.Hub.Client.Create(ctx, vr)
				return !apierrors.IsServiceUnavailable(created), created
			}); err != nil {
				return err
			}
			if created != nil {
				return fmt.Errorf("create VidraResource %s on the hub: %w", name, created)
			}
			names = append(names, name)
		}
	}
	start := time.Now()
	if err := b.waitReady(ctx, names, 2*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(b.log, "  %d bundles of %d objects Ready on %d pull clusters in %s\n", len(names), b.Objects, n, time.Since(start).Round(time.Millisecond))

	if err := b.measurePullIdle(ctx, pr, agents, names); err != nil {
		return err
	}
	if err := b.measurePullChanges(ctx, pr, agents, names); err != nil {
		return err
	}
	r.Pull = pr
	return nil
}

// startPullAgent enrolls a pull cluster for member m, as kubectl vidra enroll --pull
// does, with labels besides its name and a delivery identity that may write namespace
// ns, and runs its agent.
func (b *bench) startPullAgent(ctx context.Context, m *testfleet.Cluster, ns string, labels map[string]string) (*pullAgent, error) {
	a := &pullAgent{cluster: "pull-" + m.Name, count: &hubCount{n: tally{}}}
	hub := clientcmdapi.NewCluster()
	hub.Server, hub.CertificateAuthorityData = b.fleet.Hub.Config.Host, b.fleet.Hub.Config.CAData
	e := pull.Enrollment{
		Cluster:         a.cluster,
		Labels:          mergedLabels(labels, map[string]string{vidrav1alpha1.ClusterLabel: a.cluster}),
		SecretNamespace: namespace,
		AgentNamespace:  testoperator.AgentNamespace,
		Delivery:        identity.Spec{ServiceAccount: identity.DefaultServiceAccount, Namespaces: []string{ns}},
		Hub:             hub,
		TokenTTL:        pullTokenTTL,
		Operator:        types.NamespacedName{Namespace: namespace, Name: "vidra"},
	}
	if _, err := pull.Enroll(ctx, b.fleet.Hub.Client, m.Client, e); err != nil {
		return nil, fmt.Errorf("enroll %s: %w", a.cluster, err)
	}
	a.secret = e.EnrollmentSecret()
	if err := b.fleet.Hub.Client.Create(ctx, a.secret); err != nil {
		return nil, err
	}
	// The agent learns the hub's ID from the hub on its first start; it looks every 5s.
	if err := testfleet.WaitFor(ctx, 100*time.Millisecond, 30*time.Second, "the hub's ID published to "+a.cluster, func() (bool, error) {
		err := b.fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: pull.Namespace(a.cluster), Name: pull.HubInfoName}, &corev1.ConfigMap{})
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return nil, err
	}
	cfg, err := testoperator.AgentConfig(ctx, m)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(b.dir, "agent-"+a.cluster+".log"))
	if err != nil {
		return nil, err
	}
	a.log = logFile
	agentCtx, cancel := context.WithCancel(ctx)
	defaults := operator.DefaultOptions()
	a.agent, err = testoperator.StartAgent(agentCtx, cfg, func(o *operator.Options) {
		// The binary's defaults, but for the heartbeat and the resync, which are the
		// bench's, and the hub client, which counts.
		o.Logger = crzap.New(crzap.WriteTo(logFile), crzap.Level(zapcore.InfoLevel))
		o.AgentHeartbeat, o.ResyncInterval = b.PullHeartbeat, b.Resync
		o.RequestTimeout, o.MaxConcurrentReconciles, o.ContentGracePeriod = defaults.RequestTimeout, defaults.MaxConcurrentReconciles, defaults.ContentGracePeriod
		o.WrapHubTransport = a.count.wrap
	})
	if err != nil {
		cancel()
		_ = logFile.Close()
		return nil, fmt.Errorf("start the agent of %s: %w", a.cluster, err)
	}
	a.stop = cancel
	return a, nil
}

// mergedLabels are a's labels and b's, b's winning.
func mergedLabels(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// measurePullIdle counts the requests the idle agents make to the hub over -pull-idle,
// and the writes the hub makes meanwhile to the pull clusters' objects.
func (b *bench) measurePullIdle(ctx context.Context, pr *pullResult, agents []*pullAgent, names []string) error {
	select {
	case <-time.After(pullSettle):
	case <-ctx.Done():
		return ctx.Err()
	}
	written := &hubCount{n: tally{}}
	stopWatches, err := b.watchPullWrites(ctx, agents, names, written)
	if err != nil {
		return err
	}
	before := agentRequests(agents)
	fmt.Fprintf(b.log, "  the agents' requests to the hub from their start until idle, per agent: %s\n", before.per(float64(len(agents))))
	start := time.Now()
	select {
	case <-time.After(b.PullIdle):
	case <-ctx.Done():
		stopWatches()
		return ctx.Err()
	}
	requests := agentRequests(agents).since(before)
	elapsed := time.Since(start)
	stopWatches()
	writes := written.snapshot()

	perMinute := float64(len(agents)) * elapsed.Minutes()
	pr.IdleRequestsPerMinute = requests.total() / perMinute
	pr.IdleRequestsPerMinuteByKind = requests.per(perMinute)
	atDefault := maps.Clone(requests)
	if beats, ok := atDefault[heartbeatKind]; ok {
		atDefault[heartbeatKind] = beats * b.PullHeartbeat.Seconds() / defaultHeartbeat.Seconds()
	}
	pr.IdleRequestsPerMinuteAtDefault = atDefault.total() / perMinute
	pr.IdleRequestsPerMinuteAtDefaultByKind = atDefault.per(perMinute)
	for kind, v := range requests {
		if kind != heartbeatKind && !strings.HasPrefix(kind, "watch ") {
			pr.IdleOtherRequestsPerMinute += v / perMinute
		}
	}
	pr.IdleHubWritesPerMinute = writes.total() / perMinute
	pr.IdleHubWritesPerMinuteByKind = writes.per(perMinute)
	return nil
}

// watchPullWrites counts, until stop is called, every change the hub's API server makes
// to the pull clusters' VidraClusters, heartbeat Leases, VidraBundles and VidraResources,
// whoever makes it: one watch event each.
func (b *bench) watchPullWrites(ctx context.Context, agents []*pullAgent, names []string, into *hubCount) (stop func(), err error) {
	hub, err := client.NewWithWatch(b.fleet.Hub.Config, client.Options{Scheme: b.fleet.Hub.Client.Scheme()})
	if err != nil {
		return nil, err
	}
	clusters, namespaces, resources := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, a := range agents {
		clusters[a.cluster], namespaces[pull.Namespace(a.cluster)] = true, true
	}
	for _, n := range names {
		resources[n] = true
	}
	kinds := []struct {
		resource string
		list     client.ObjectList
		keep     func(client.Object) bool
	}{
		{"vidraclusters", &vidrav1alpha1.VidraClusterList{}, func(o client.Object) bool { return clusters[o.GetName()] }},
		{"leases", &coordinationv1.LeaseList{}, func(o client.Object) bool { return namespaces[o.GetNamespace()] }},
		{"vidrabundles", &vidrav1alpha1.VidraBundleList{}, func(o client.Object) bool { return namespaces[o.GetNamespace()] }},
		{"vidraresources", &vidrav1alpha1.VidraResourceList{}, func(o client.Object) bool { return resources[o.GetName()] }},
	}
	var watches []watch.Interface
	var wg sync.WaitGroup
	stop = func() {
		for _, w := range watches {
			w.Stop()
		}
		wg.Wait()
	}
	for _, k := range kinds {
		if err := hub.List(ctx, k.list); err != nil {
			stop()
			return nil, err
		}
		w, err := hub.Watch(ctx, k.list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: k.list.GetResourceVersion()}})
		if err != nil {
			stop()
			return nil, err
		}
		watches = append(watches, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.ResultChan() {
				obj, ok := ev.Object.(client.Object)
				if !ok || !k.keep(obj) {
					continue
				}
				switch ev.Type {
				case watch.Added:
					into.add("create " + k.resource)
				case watch.Modified:
					into.add("update " + k.resource)
				case watch.Deleted:
					into.add("delete " + k.resource)
				}
			}
		}()
	}
	return stop, nil
}

// measurePullChanges changes the hub's VidraResources one after another, round the pull
// clusters, and times each until the hub shows it Ready for its new generation.
func (b *bench) measurePullChanges(ctx context.Context, pr *pullResult, agents []*pullAgent, names []string) error {
	hub, err := client.NewWithWatch(b.fleet.Hub.Config, client.Options{Scheme: b.fleet.Hub.Client.Scheme()})
	if err != nil {
		return err
	}
	before := agentRequests(agents)
	var latencies []time.Duration
	for i := range b.PullChanges {
		d, err := b.pullChange(ctx, hub, names[i%len(names)], fmt.Sprintf("change-%d", i))
		if err != nil {
			return err
		}
		latencies = append(latencies, d)
	}
	requests := agentRequests(agents).since(before)
	pr.Changes = len(latencies)
	pr.ChangeToReadyP50Ms, pr.ChangeToReadyP90Ms, pr.ChangeToReadyMaxMs = percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 100)
	if pr.Changes > 0 {
		pr.RequestsPerChange = requests.total() / float64(pr.Changes)
		pr.RequestsPerChangeByKind = requests.per(float64(pr.Changes))
	}
	return nil
}

// pullChange sets the data of every ConfigMap of the VidraResource name to value and
// returns how long until the hub's VidraResource is Ready for that generation, watched.
func (b *bench) pullChange(ctx context.Context, hub client.WithWatch, name, value string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	vr := &vidrav1alpha1.VidraResource{}
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, vr); err != nil {
		return 0, err
	}
	w, err := hub.Watch(ctx, &vidrav1alpha1.VidraResourceList{}, &client.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
		Raw:           &metav1.ListOptions{ResourceVersion: vr.ResourceVersion},
	})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	changed := vr.DeepCopy()
	changed.Spec.Manifest = pullManifest(name, b.Objects, value)
	start := time.Now()
	if err := hub.Patch(ctx, changed, client.MergeFrom(vr)); err != nil {
		return 0, err
	}
	generation := changed.Generation
	for ev := range w.ResultChan() {
		got, ok := ev.Object.(*vidrav1alpha1.VidraResource)
		if ok && got.Generation == generation && conditions.IsReady(got) && got.Status.ObservedGeneration == generation {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("VidraResource %s not Ready for generation %d: %w", name, generation, context.Cause(ctx))
}

// pullManifest is a bundle of n ConfigMaps named <prefix>-<i> holding value.
func pullManifest(prefix string, n int, value string) string {
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d\ndata:\n  k: %s\n", prefix, i, value))
	}
	return strings.Join(docs, "---\n")
}

func memberNames(members []*testfleet.Cluster) []string {
	names := make([]string, 0, len(members))
	for _, m := range members {
		names = append(names, m.Name)
	}
	return names
}

// agentRequests adds up the requests every agent made to the hub so far.
func agentRequests(agents []*pullAgent) tally {
	sum := tally{}
	for _, a := range agents {
		sum = sum.added(a.count.snapshot())
	}
	return sum
}

// hubCount counts requests (or writes) by what they were: "watch vidrabundles",
// "update leases" (an agent's heartbeat), "create serviceaccounts/token" (a token renewal).
type hubCount struct {
	mu sync.Mutex
	n  tally
}

func (c *hubCount) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[kind]++
}

func (c *hubCount) snapshot() tally {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// wrap counts every request made through rt: an agent's hub client is wrapped with it.
func (c *hubCount) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.add(requestKind(req))
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKind names a request to a Kubernetes API server by its verb and resource, as
// the API server's authorizer sees it: "get leases", "list vidrabundles", "watch
// vidrabundles", "update vidrabundles/status", "create serviceaccounts/token".
func requestKind(req *http.Request) string {
	segments := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(segments) >= 2 && segments[0] == "api":
		rest = segments[2:]
	case len(segments) >= 3 && segments[0] == "apis":
		rest = segments[3:]
	default:
		return strings.ToLower(req.Method) + " " + req.URL.Path // discovery, /version
	}
	if len(rest) > 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return strings.ToLower(req.Method) + " " + req.URL.Path
	}
	resource, named := rest[0], len(rest) > 1
	if len(rest) > 2 {
		resource += "/" + rest[2]
	}
	verb := strings.ToLower(req.Method)
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPut:
		verb = "update"
	case http.MethodPost:
		verb = "create"
	}
	return verb + " " + resource
}
