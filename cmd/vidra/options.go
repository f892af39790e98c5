package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/vidra-operator/vidra/internal/fleet/admissionguard"
	"github.com/vidra-operator/vidra/internal/source/helmrender"
	"github.com/vidra-operator/vidra/operator"
)

// options are the binary's command-line settings: the operator's, and what belongs to
// the process (the hub's kubeconfig, tracing, logging).
type options struct {
	// kubeconfig of the hub (or, in standalone mode, the local cluster).
	kubeconfig string
	// otlpEndpoint receives the process's traces.
	otlpEndpoint string
	// logging: controller-runtime's zap flags (--zap-log-level, --zap-encoder, ...).
	logging crzap.Options
	// mode is hub, standalone or agent.
	mode string
	// showVersion prints the binary's version instead of starting it.
	showVersion bool
	// operator is everything the operator is built from.
	operator operator.Options
}

// Modes of the binary.
const (
	modeHub        = "hub"
	modeStandalone = "standalone"
	modeAgent      = "agent"
)

// parseOptions reads args into options; -h prints the usage and returns flag.ErrHelp.
func parseOptions(args []string) (options, error) {
	o := options{operator: operator.DefaultOptions()}
	ns := defaultNamespace()
	o.operator.LeaderElectionNamespace, o.operator.ClusterSecretNamespace = ns, ns
	o.operator.ContentNamespace, o.operator.InfrahubSecretNamespace = ns, ns
	o.operator.ShardID = defaultShardID()

	fs := flag.NewFlagSet("vidra", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "",
		"Path to the kubeconfig of the hub cluster. Empty: $KUBECONFIG, then in-cluster config, then ~/.kube/config.")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "",
		"OTLP/HTTP endpoint URL to send traces to (such as http://otel-collector:4318). Empty: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; with neither set, tracing is off. The other OTEL_EXPORTER_OTLP_* variables apply.")
	fs.StringVar(&o.mode, "mode", modeHub,
		"hub: deliver to the enrolled fleet; standalone: only the cluster the operator runs in (--cluster-provider=none); agent: the agent of a pull cluster, which fetches its bundles from the hub named in the Secret vidra-agent-hub of --agent-namespace (kubectl vidra enroll --pull writes it); --kubeconfig is then the member's own.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the operator's version and exit.")
	bindServingFlags(fs, &o.operator)
	bindPullFlags(fs, &o.operator)
	bindAvailabilityFlags(fs, &o.operator)
	bindFleetFlags(fs, &o.operator)
	bindDeliveryFlags(fs, &o.operator)
	bindInfrahubFlags(fs, &o.operator)
	bindSourceFlags(fs, &o.operator)
	bindHelmRenderFlags(fs, &o.operator.HelmRender)
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
	switch o.mode {
	case modeHub:
	case modeStandalone, modeAgent:
		o.operator.ClusterProvider = operator.ProviderNone
	default:
		return o, fmt.Errorf("--mode=%q: want %q, %q or %q", o.mode, modeHub, modeStandalone, modeAgent)
	}
	if o.mode == modeAgent && o.operator.AgentHeartbeat < time.Second {
		return o, fmt.Errorf("--agent-heartbeat=%v: want at least 1s", o.operator.AgentHeartbeat)
	}
	return o, validate(&o.operator)
}

// bindPullFlags binds pull mode: the hub's view of agents, and the agent's own settings.
func bindPullFlags(fs *flag.FlagSet, o *operator.Options) {
	fs.DurationVar(&o.AgentTimeout, "agent-timeout", o.AgentTimeout,
		"Hub: how long a pull cluster's agent may go without a heartbeat before its VidraCluster is Unreachable.")
	fs.StringVar(&o.AgentNamespace, "agent-namespace", o.AgentNamespace,
		"Agent: the namespace of the agent's Secret vidra-agent-hub, its content and history.")
	fs.DurationVar(&o.AgentHeartbeat, "agent-heartbeat", o.AgentHeartbeat,
		"Agent: how often the agent reports to the hub (one write to the hub each time).")
}

// appendList is a flag's setter that appends each comma-separated value to dst.
func appendList(dst *[]string) func(string) error {
	return func(v string) error {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				*dst = append(*dst, c)
			}
		}
		return nil
	}
}

// validate refuses settings that cannot be met, naming their flags.
func validate(o *operator.Options) error {
	if o.ClusterProvider != operator.ProviderSecret && o.ClusterProvider != operator.ProviderNone {
		return fmt.Errorf("--cluster-provider=%q: want %q or %q", o.ClusterProvider, operator.ProviderSecret, operator.ProviderNone)
	}
	if !(o.ClusterQPS >= 0) || (o.ClusterQPS > 0 && o.ClusterBurst < 1) { // NaN too
		return fmt.Errorf("--cluster-qps=%v --cluster-burst=%d: want a rate of 0 (no limit) or more, and a burst of at least 1 with a rate", o.ClusterQPS, o.ClusterBurst)
	}
	if _, err := operator.ParseServiceAccount(o.LocalServiceAccount); err != nil {
		return fmt.Errorf("--local-service-account: %w", err)
	}
	if _, err := admissionguard.Parse(o.RequiredAdmissionPolicies); err != nil {
		return fmt.Errorf("--required-admission-policies: %w", err)
	}
	if err := validateLeaderElection(o); err != nil {
		return err
	}
	if err := operator.ValidateInventory(o); err != nil {
		return err
	}
	if o.Sharding {
		if o.ClusterProvider == operator.ProviderNone {
			return fmt.Errorf("--sharding splits a fleet of enrolled clusters: it needs --cluster-provider=%s", operator.ProviderSecret)
		}
		if o.ShardLeaseDuration < 3*time.Second {
			return fmt.Errorf("--shard-lease-duration=%v: want at least 3s", o.ShardLeaseDuration)
		}
		o.LeaderElection = true
	}
	return validateInfrahubBounds(o)
}

// validateLeaderElection refuses timings client-go's leader election would refuse, or
// accept only to lose the Lease between two renewals.
func validateLeaderElection(o *operator.Options) error {
	lease, renew, retry := o.LeaderElectionLeaseDuration, o.LeaderElectionRenewDeadline, o.LeaderElectionRetryPeriod
	if retry <= 0 || float64(renew) <= leaderelection.JitterFactor*float64(retry) || lease <= renew {
		return fmt.Errorf("--leader-election-lease-duration=%v --leader-election-renew-deadline=%v --leader-election-retry-period=%v: want a lease longer than the deadline, longer than %v retry periods",
			lease, renew, retry, leaderelection.JitterFactor)
	}
	return nil
}

// validateInfrahubBounds refuses bounds of reading Infrahub that bound nothing: they are
// what keeps one Infrahub from taking the memory every sync shares.
func validateInfrahubBounds(o *operator.Options) error {
	switch {
	case o.InfrahubSyncMaxArtifacts < 1:
		return fmt.Errorf("--infrahub-sync-max-artifacts=%d: want at least 1", o.InfrahubSyncMaxArtifacts)
	case o.InfrahubSyncMaxBytes < 1:
		return fmt.Errorf("--infrahub-sync-max-bytes=%d: want at least 1 byte", o.InfrahubSyncMaxBytes)
	case o.InfrahubSyncTimeout <= 0:
		return fmt.Errorf("--infrahub-sync-timeout=%v: want more than 0", o.InfrahubSyncTimeout)
	case o.InfrahubMemoryBudget < 1<<20:
		return fmt.Errorf("--infrahub-memory-budget=%d: want at least 1Mi", o.InfrahubMemoryBudget)
	}
	return nil
}

// bindServingFlags binds the hub client's and the endpoints' flags.
func bindServingFlags(fs *flag.FlagSet, o *operator.Options) {
	fs.Float64Var(&o.HubQPS, "hub-qps", o.HubQPS,
		"Client QPS towards the hub: every VidraResource reconcile writes its status there, so this bounds delivery rate.")
	fs.IntVar(&o.HubBurst, "hub-burst", o.HubBurst, "Client burst towards the hub.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		"Address the /healthz and /readyz endpoints bind to; 0 disables them.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress,
		"Address Go's pprof endpoints (/debug/pprof) bind to, for profiling; 0 (the default) disables them.")
}

// bindAvailabilityFlags binds leader election and sharding.
func bindAvailabilityFlags(fs *flag.FlagSet, o *operator.Options) {
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection,
		"Elect a leader through a Lease so only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader election Lease.")
	fs.DurationVar(&o.LeaderElectionLeaseDuration, "leader-election-lease-duration", o.LeaderElectionLeaseDuration,
		"How long the leader's Lease outlives its last renewal: a standby takes over a leader that died within it.")
	fs.DurationVar(&o.LeaderElectionRenewDeadline, "leader-election-renew-deadline", o.LeaderElectionRenewDeadline,
		"How long the leader tries to renew its Lease before it steps down and exits; under --leader-election-lease-duration.")
	fs.DurationVar(&o.LeaderElectionRetryPeriod, "leader-election-retry-period", o.LeaderElectionRetryPeriod,
		"How often the leader renews its Lease and a standby tries to take it.")
	fs.BoolVar(&o.Sharding, "sharding", o.Sharding,
		"Split the fleet across replicas: each enrolled cluster is reconciled by one replica at a time, fenced by a Lease per cluster in --leader-election-namespace. Implies --leader-elect (the leader syncs Infrahub and serves the local cluster).")
	fs.StringVar(&o.ShardID, "shard-id", o.ShardID,
		"This replica's identity among its peers when --sharding; unique per replica. Default: $POD_NAME, else the host name.")
	fs.DurationVar(&o.ShardLeaseDuration, "shard-lease-duration", o.ShardLeaseDuration,
		"How long a cluster's fence Lease outlives its holder's last renewal when --sharding; it is renewed every third of it.")
}

// bindFleetFlags binds how clusters are enrolled and engaged.
func bindFleetFlags(fs *flag.FlagSet, o *operator.Options) {
	fs.StringVar(&o.ClusterProvider, "cluster-provider", o.ClusterProvider,
		"How member clusters are enrolled: 'secret' (labeled kubeconfig Secrets) or 'none' (standalone: only the local cluster, no Secret is read).")
	fs.StringVar(&o.ClusterSecretNamespace, "cluster-secret-namespace", o.ClusterSecretNamespace,
		"The only namespace whose labeled kubeconfig Secrets enroll clusters.")
	fs.BoolVar(&o.KubeconfigPolicy.AllowExec, "allow-kubeconfig-exec", o.KubeconfigPolicy.AllowExec,
		"Allow exec credential plugins and auth-provider plugins in enrollment kubeconfigs (exec plugins must also be in --kubeconfig-exec-allowlist).")
	fs.Func("kubeconfig-exec-allowlist", "Comma-separated exec plugin commands allowed with --allow-kubeconfig-exec.", appendList(&o.KubeconfigPolicy.ExecAllowlist))
	fs.Func("cluster-inventory", "Comma-separated inventories whose clusters are enrolled beside the labeled Secrets: cluster-api (Cluster API's Clusters and kubeconfig Secrets), cluster-profile (ClusterProfiles, with the secretreader access provider's token), argocd (Argo CD's cluster Secrets). None by default.",
		appendList(&o.ClusterInventory))
	fs.Func("cluster-inventory-namespaces", "Comma-separated namespaces the inventories are read from (their Secrets too); none by default.",
		appendList(&o.ClusterInventoryNamespaces))
	fs.StringVar(&o.PublishClusterProfiles, "publish-cluster-profiles", "",
		"Namespace where a ClusterProfile (multicluster.x-k8s.io) of each enrolled cluster is written, for Kueue, Argo CD or other consumers of the Cluster Inventory API; none by default.")
	fs.BoolVar(&o.KubeconfigPolicy.AllowInsecureTLS, "allow-insecure-tls", o.KubeconfigPolicy.AllowInsecureTLS,
		"Allow insecure-skip-tls-verify and plain http servers in enrollment kubeconfigs.")
	fs.Float64Var(&o.ClusterQPS, "cluster-qps", o.ClusterQPS,
		"Requests per second to each engaged cluster, all of the operator's clients of it together. 0: no client-side limit; the cluster's API Priority and Fairness paces the operator.")
	fs.IntVar(&o.ClusterBurst, "cluster-burst", o.ClusterBurst, "Requests to each engaged cluster allowed at once above --cluster-qps, when it is set.")
	fs.DurationVar(&o.ClusterSyncTimeout, "cluster-sync-timeout", o.ClusterSyncTimeout,
		"How long to wait for an engaged cluster's cache to sync.")
	fs.DurationVar(&o.ClusterProbeInterval, "cluster-probe-interval", o.ClusterProbeInterval,
		"How often each engaged cluster's API server is probed.")
	fs.Float64Var(&o.TokenRenewalPoint, "token-renewal-point", o.TokenRenewalPoint,
		"The fraction of its lifetime after which the token of an identity kubectl vidra enroll created is renewed (between 0 and 1); checked at every probe.")
	fs.DurationVar(&o.ClusterProbeTimeout, "cluster-probe-timeout", o.ClusterProbeTimeout,
		"Timeout of one probe (and of reaching a cluster when it is enrolled).")
}

// bindDeliveryFlags binds how VidraResources are reconciled and where large bundles are
// kept.
func bindDeliveryFlags(fs *flag.FlagSet, o *operator.Options) {
	fs.StringVar(&o.HubID, "hub-id", o.HubID,
		"This operator's identity in the owners sets of applied objects, so hubs sharing a member never take each other's objects. Empty: derived from the UID of the hub's kube-system namespace.")
	fs.BoolVar(&o.DisableLocalCluster, "disable-local-cluster", o.DisableLocalCluster,
		"Refuse destinations that name the cluster the operator runs in.")
	fs.StringVar(&o.LocalServiceAccount, "local-service-account", o.LocalServiceAccount,
		"NAMESPACE/NAME of the ServiceAccount that bundles for the cluster the operator runs in are applied as, when they name none (spec.serviceAccountName). Empty: such bundles are refused. The operator's own identity never applies a bundle.")
	fs.StringVar(&o.RequiredAdmissionPolicies, "required-admission-policies", o.RequiredAdmissionPolicies,
		"The hub's admission policies that record and check who asks for a delivery, as validating/NAME,mutating/NAME (the chart sets them). While one of them or its binding is missing, bundles that name their cluster by server URL, or do not say who asked, are refused. Empty: none are required.")
	fs.DurationVar(&o.ResyncInterval, "resync-interval", o.ResyncInterval,
		"Reapply every VidraResource at least this often, whatever the watches report.")
	fs.BoolVar(&o.ReconcileOnEvents, "reconcile-on-events", o.ReconcileOnEvents,
		"Repair drift on every VidraResource as the destination reports it, as if each had destination.reconcileOnEvents: true. Off: only those that ask for it; the others wait for --resync-interval.")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles,
		"VidraResources reconciled at once.")
	fs.IntVar(&o.MaxConcurrentReconcilesPerCluster, "max-concurrent-reconciles-per-cluster", o.MaxConcurrentReconcilesPerCluster,
		"Most of those workers one destination cluster holds at once, so a cluster whose API server or admission webhooks answer slowly leaves the rest to the others (0: no bound). Standalone and agent modes deliver to one cluster, unbounded.")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout,
		"Timeout of every request to a destination cluster, so one hung cluster holds no worker for long.")
	fs.StringVar(&o.ContentNamespace, "content-namespace", o.ContentNamespace,
		"Namespace of the content store: ConfigMaps holding bundles too large to be inline in a VidraResource (compressed, content-addressed, in chunks).")
	fs.DurationVar(&o.ContentGracePeriod, "content-grace-period", o.ContentGracePeriod,
		"How long stored content that no VidraResource names is kept after it was last stored, so an upload can be named before it is collected.")
}

// bindInfrahubFlags binds how InfrahubSyncs read Infrahub and hear from it.
func bindInfrahubFlags(fs *flag.FlagSet, o *operator.Options) {
	fs.StringVar(&o.InfrahubSecretNamespace, "infrahub-secret-namespace", o.InfrahubSecretNamespace,
		"The only namespace InfrahubSyncs' credentials and CA Secrets are read from.")
	fs.DurationVar(&o.InfrahubTimeout, "infrahub-timeout", o.InfrahubTimeout,
		"Timeout of every request to Infrahub.")
	fs.IntVar(&o.MaxConcurrentSyncs, "max-concurrent-syncs", o.MaxConcurrentSyncs,
		"Syncs of each kind (InfrahubSync, GitSync, OCISync, HelmSync) synced at once.")
	fs.IntVar(&o.MaxConcurrentSyncsPerSource, "max-concurrent-syncs-per-source", o.MaxConcurrentSyncsPerSource,
		"Most of those syncs of one kind whose source is one server (an Infrahub, a Git host, a registry, a Helm repository: scheme, host and port) synced at once, so a slow or trickling server leaves the rest to the others (0: no bound).")
	fs.IntVar(&o.MaxConcurrentSyncsPerRequester, "max-concurrent-syncs-per-requester", o.MaxConcurrentSyncsPerRequester,
		"Most of those syncs of one kind whose author (the requested-by stamp) is one user synced at once, so a tenant whose syncs point at several slow servers leaves the rest to the others: keep it below --max-concurrent-syncs. Syncs without a stamp are bounded per server alone (0: no bound).")
	fs.IntVar(&o.InfrahubSyncMaxArtifacts, "infrahub-sync-max-artifacts", o.InfrahubSyncMaxArtifacts,
		"Most artifacts one InfrahubSync may list; a larger listing is not read to its end, and the sync is Stalled (LimitExceeded) with nothing changed.")
	fs.Var(bytesValue{&o.InfrahubSyncMaxBytes}, "infrahub-sync-max-bytes",
		"Most artifact content, a `size` such as 512Mi, one InfrahubSync downloads in one sync (unchanged artifacts are not downloaded); past it, the sync is Stalled (LimitExceeded) and the rest keep what they delivered.")
	fs.DurationVar(&o.InfrahubSyncTimeout, "infrahub-sync-timeout", o.InfrahubSyncTimeout,
		"Most time one InfrahubSync's listing and downloads take together; past it, the sync is Stalled (LimitExceeded).")
	fs.Var(bytesValue{&o.InfrahubMemoryBudget}, "infrahub-memory-budget",
		"Memory, a `size` such as 512Mi, that all InfrahubSyncs' answers from Infrahub may take at once: an artifact holds 8 times its size of it while it is downloaded, decoded and stored, so the largest artifact delivered is an eighth of it. Keep it well under the pod's memory limit.")
	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", o.WebhookBindAddress,
		"Address Infrahub's webhooks (POST /hooks/infrahub) are received on; 0 disables them.")
	fs.StringVar(&o.WebhookSecret, "infrahub-webhook-secret", o.WebhookSecret,
		"Secret, in --infrahub-secret-namespace, whose 'key' is the key Infrahub signs webhooks with. Empty: webhooks are not received.")
}

func bindSourceFlags(fs *flag.FlagSet, o *operator.Options) {
	fs.IntVar(&o.PreviewClusters, "preview-clusters", o.PreviewClusters,
		"Clusters one preview of a ref (a GitSync's spec.previews) dry-runs at once. Previews run beside the syncs' workers, one sync at a time, and never hold a delivery.")
	fs.IntVar(&o.AlertQueueSize, "alert-queue-size", o.AlertQueueSize,
		"Most events waiting to be matched against the Alerts, and waiting for each AlertProvider; past it, an event is dropped and counted (vidra_alerts_dropped_total), and delivery never waits.")
	fs.DurationVar(&o.AlertDedupeWindow, "alert-dedupe-window", o.AlertDedupeWindow,
		"An event equal to one sent to an AlertProvider within this window (same object, reason, message and metadata) is not sent again.")
	fs.StringVar(&o.SourceCacheDir, "source-cache-dir", o.SourceCacheDir,
		"Directory where GitSyncs' checkouts, OCISyncs' artifacts and HelmSyncs' charts from OCI registries are kept, one per URL and revision however many syncs read them; empty: a new temporary directory, removed when the operator stops.")
	fs.Var(bytesValue{&o.SourceCacheBytes}, "source-cache-bytes",
		"Most disk, a `size` such as 1Gi, the checkouts and artifacts kept in --source-cache-dir take: the least recently used one nobody reads is deleted first. Keep it under the volume's size by the largest fetch (--git-max-repo-bytes, --oci-max-artifact-bytes).")
	fs.Var(bytesValue{&o.GitMaxRepoBytes}, "git-max-repo-bytes",
		"Largest checkout of a GitSync's repository on disk (.git included), a `size` such as 256Mi; past it, the sync is Stalled (LimitExceeded) and keeps what it delivered.")
	fs.Var(bytesValue{&o.OCIMaxArtifactBytes}, "oci-max-artifact-bytes",
		"Largest OCISync artifact, or HelmSync chart from an OCI registry, compressed and extracted, a `size` such as 128Mi; past it, the sync is Stalled (LimitExceeded).")
	fs.IntVar(&o.SourceMaxFiles, "source-max-files", o.SourceMaxFiles,
		"Most files a checkout or an artifact may hold.")
	fs.Var(bytesValue{&o.SourceMaxBundleBytes}, "source-max-bundle-bytes",
		"Largest bundle built from a GitSync's or OCISync's path, a `size` such as 32Mi (at most 64Mi, what the content store keeps).")
	fs.DurationVar(&o.SourceTimeout, "source-timeout", o.SourceTimeout,
		"Most time one fetch of a repository, an artifact or a chart may take.")
	fs.Var(bytesValue{&o.HelmMaxIndexBytes}, "helm-max-index-bytes",
		"Largest index.yaml of a HelmSync's repository, a `size` such as 32Mi; past it, the sync is Stalled (LimitExceeded) and the index is not read further.")
	fs.Var(bytesValue{&o.HelmMaxChartBytes}, "helm-max-chart-bytes",
		"Largest chart archive a HelmSync downloads from a Helm repository, a `size` such as 16Mi (a chart from an OCI registry is bounded by --oci-max-artifact-bytes); past it, the sync is Stalled (LimitExceeded).")
}

// bindHelmRenderFlags binds the bounds of each chart's rendering, which runs in a child
// process of its own (vidra render-helm).
func bindHelmRenderFlags(fs *flag.FlagSet, o *helmrender.Options) {
	fs.Var(bytesValue{&o.MaxMemory}, "helm-render-max-memory",
		"Most memory, a `size` such as 512Mi, the process rendering one chart for one cluster may take; past it the process is stopped and the HelmSync is Stalled (LimitExceeded). Up to --helm-render-processes of them run beside the operator, within its container's memory limit.")
	fs.DurationVar(&o.Timeout, "helm-render-timeout", o.Timeout,
		"Most time one chart's rendering for one cluster may take; past it the rendering is stopped, the HelmSync is not Ready (LimitExceeded), and the chart is rendered again 10 minutes later.")
	fs.IntVar(&o.Processes, "helm-render-processes", o.Processes,
		"Most charts rendered at once, each in a process of its own.")
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
	return operator.DefaultNamespace
}
