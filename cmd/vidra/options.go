package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// options are the operator's command-line settings, grouped by concern.
type options struct {
	// Connection to the hub (or, in standalone mode, the local cluster).
	kubeconfig string
	hubQPS     float64
	hubBurst   int

	// Serving.
	metricsBindAddress     string
	healthProbeBindAddress string
	pprofBindAddress       string

	// High availability.
	leaderElect             bool
	leaderElectionNamespace string
	sharding                bool
	shardID                 string
	shardLeaseDuration      time.Duration

	// The fleet: how clusters are enrolled and engaged.
	clusterProvider        string
	clusterSecretNamespace string
	allowKubeconfigExec    bool
	kubeconfigExecAllow    []string
	allowInsecureTLS       bool
	clusterQPS             float64
	clusterBurst           int
	clusterSyncTimeout     time.Duration
	clusterProbeInterval   time.Duration
	tokenRenewalPoint      float64
	otlpEndpoint           string
	clusterProbeTimeout    time.Duration

	// Delivery: how VidraResources are reconciled.
	hubID                   string
	disableLocalCluster     bool
	resyncInterval          time.Duration
	maxConcurrentReconciles int
	requestTimeout          time.Duration
	reconcileOnEvents       bool

	// The content store: large bundles kept on the hub.
	contentNamespace   string
	contentGracePeriod time.Duration

	// Infrahub: how InfrahubSyncs read it and hear from it.
	infrahubSecretNamespace string
	infrahubTimeout         time.Duration
	maxConcurrentSyncs      int
	webhookBindAddress      string
	webhookSecret           string

	// Logging: controller-runtime's zap flags (--zap-log-level, --zap-encoder, ...).
	logging crzap.Options
}

// Cluster providers.
const (
	providerSecret = "secret"
	providerNone   = "none"
)

const leaderElectionID = "vidra.infrahub.operators.com"

// parseOptions reads args into options; -h prints the usage and returns flag.ErrHelp.
func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("vidra", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "",
		"Path to the kubeconfig of the hub cluster. Empty: $KUBECONFIG, then in-cluster config, then ~/.kube/config.")
	fs.Float64Var(&o.hubQPS, "hub-qps", 100,
		"Client QPS towards the hub: every VidraResource reconcile writes its status there, so this bounds delivery rate.")
	fs.IntVar(&o.hubBurst, "hub-burst", 200, "Client burst towards the hub.")
	fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", ":8080",
		"Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&o.healthProbeBindAddress, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz endpoints bind to; 0 disables them.")
	fs.StringVar(&o.pprofBindAddress, "pprof-bind-address", "0",
		"Address Go's pprof endpoints (/debug/pprof) bind to, for profiling; 0 (the default) disables them.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader through a Lease so only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", defaultNamespace(),
		"Namespace of the leader election Lease.")
	fs.BoolVar(&o.sharding, "sharding", false,
		"Split the fleet across replicas: each enrolled cluster is reconciled by one replica at a time, fenced by a Lease per cluster in --leader-election-namespace. Implies --leader-elect (the leader syncs Infrahub and serves the local cluster).")
	fs.StringVar(&o.shardID, "shard-id", defaultShardID(),
		"This replica's identity among its peers when --sharding; unique per replica. Default: $POD_NAME, else the host name.")
	fs.DurationVar(&o.shardLeaseDuration, "shard-lease-duration", 15*time.Second,
		"How long a cluster's fence Lease outlives its holder's last renewal when --sharding; it is renewed every third of it.")
	fs.StringVar(&o.clusterProvider, "cluster-provider", providerSecret,
		"How member clusters are enrolled: 'secret' (labeled kubeconfig Secrets) or 'none' (standalone: only the local cluster, no Secret is read).")
	fs.StringVar(&o.clusterSecretNamespace, "cluster-secret-namespace", defaultNamespace(),
		"The only namespace whose labeled kubeconfig Secrets enroll clusters.")
	fs.BoolVar(&o.allowKubeconfigExec, "allow-kubeconfig-exec", false,
		"Allow exec credential plugins and auth-provider plugins in enrollment kubeconfigs (exec plugins must also be in --kubeconfig-exec-allowlist).")
	fs.Func("kubeconfig-exec-allowlist", "Comma-separated exec plugin commands allowed with --allow-kubeconfig-exec.", func(v string) error {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				o.kubeconfigExecAllow = append(o.kubeconfigExecAllow, c)
			}
		}
		return nil
	})
	fs.BoolVar(&o.allowInsecureTLS, "allow-insecure-tls", false,
		"Allow insecure-skip-tls-verify and plain http servers in enrollment kubeconfigs.")
	fs.Float64Var(&o.clusterQPS, "cluster-qps", 0,
		"Requests per second to each engaged cluster, all of the operator's clients of it together. 0: no client-side limit; the cluster's API Priority and Fairness paces the operator.")
	fs.IntVar(&o.clusterBurst, "cluster-burst", 100, "Requests to each engaged cluster allowed at once above --cluster-qps, when it is set.")
	fs.DurationVar(&o.clusterSyncTimeout, "cluster-sync-timeout", 30*time.Second,
		"How long to wait for an engaged cluster's cache to sync.")
	fs.DurationVar(&o.clusterProbeInterval, "cluster-probe-interval", 30*time.Second,
		"How often each engaged cluster's API server is probed.")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "",
		"OTLP/HTTP endpoint URL to send traces to (such as http://otel-collector:4318). Empty: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; with neither set, tracing is off. The other OTEL_EXPORTER_OTLP_* variables apply.")
	fs.Float64Var(&o.tokenRenewalPoint, "token-renewal-point", 2.0/3,
		"The fraction of its lifetime after which the token of an identity kubectl vidra enroll created is renewed (between 0 and 1); checked at every probe.")
	fs.DurationVar(&o.clusterProbeTimeout, "cluster-probe-timeout", 5*time.Second,
		"Timeout of one probe (and of reaching a cluster when it is enrolled).")
	fs.StringVar(&o.hubID, "hub-id", "",
		"This operator's identity in the owners sets of applied objects, so hubs sharing a member never take each other's objects. Empty: derived from the UID of the hub's kube-system namespace.")
	fs.BoolVar(&o.disableLocalCluster, "disable-local-cluster", false,
		"Refuse destinations that name the cluster the operator runs in.")
	fs.DurationVar(&o.resyncInterval, "resync-interval", 10*time.Minute,
		"Reapply every VidraResource at least this often, whatever the watches report.")
	fs.BoolVar(&o.reconcileOnEvents, "reconcile-on-events", false,
		"Repair drift on every VidraResource as the destination reports it, as if each had destination.reconcileOnEvents: true. Off: only those that ask for it; the others wait for --resync-interval.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 10,
		"VidraResources reconciled at once.")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 30*time.Second,
		"Timeout of every request to a destination cluster, so one hung cluster holds no worker for long.")
	fs.StringVar(&o.contentNamespace, "content-namespace", defaultNamespace(),
		"Namespace of the content store: ConfigMaps holding bundles too large to be inline in a VidraResource (compressed, content-addressed, in chunks).")
	fs.DurationVar(&o.contentGracePeriod, "content-grace-period", 10*time.Minute,
		"How long stored content that no VidraResource names is kept after it was last stored, so an upload can be named before it is collected.")
	fs.StringVar(&o.infrahubSecretNamespace, "infrahub-secret-namespace", defaultNamespace(),
		"The only namespace InfrahubSyncs' credentials and CA Secrets are read from.")
	fs.DurationVar(&o.infrahubTimeout, "infrahub-timeout", 30*time.Second,
		"Timeout of every request to Infrahub.")
	fs.IntVar(&o.maxConcurrentSyncs, "max-concurrent-syncs", 4,
		"InfrahubSyncs synced at once.")
	fs.StringVar(&o.webhookBindAddress, "webhook-bind-address", ":8090",
		"Address Infrahub's webhooks (POST /hooks/infrahub) are received on; 0 disables them.")
	fs.StringVar(&o.webhookSecret, "infrahub-webhook-secret", "",
		"Secret, in --infrahub-secret-namespace, whose 'key' is the key Infrahub signs webhooks with. Empty: webhooks are not received.")
	o.logging.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "vidra: multi-cluster delivery operator for Infrahub artifacts.\n\nUsage: vidra [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.clusterProvider != providerSecret && o.clusterProvider != providerNone {
		return o, fmt.Errorf("--cluster-provider=%q: want %q or %q", o.clusterProvider, providerSecret, providerNone)
	}
	if !(o.clusterQPS >= 0) || (o.clusterQPS > 0 && o.clusterBurst < 1) { // NaN too
		return o, fmt.Errorf("--cluster-qps=%v --cluster-burst=%d: want a rate of 0 (no limit) or more, and a burst of at least 1 with a rate", o.clusterQPS, o.clusterBurst)
	}
	if o.sharding {
		if o.clusterProvider == providerNone {
			return o, fmt.Errorf("--sharding splits a fleet of enrolled clusters: it needs --cluster-provider=%s", providerSecret)
		}
		if o.shardLeaseDuration < 3*time.Second {
			return o, fmt.Errorf("--shard-lease-duration=%v: want at least 3s", o.shardLeaseDuration)
		}
		o.leaderElect = true
	}
	return o, nil
}

// defaultShardID is $POD_NAME (set by the chart through the downward API), else the
// host name.
func defaultShardID() string {
	if name := os.Getenv("POD_NAME"); name != "" {
		return name
	}
	host, _ := os.Hostname()
	return host
}

// defaultNamespace is the namespace the operator runs in: $POD_NAMESPACE (set by the
// chart through the downward API), else vidra-system.
func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "vidra-system"
}
