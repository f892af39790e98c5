package operator

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/vidra-operator/vidra/internal/fleet/hublink"
	"github.com/vidra-operator/vidra/internal/fleet/kubeconfig"
	"github.com/vidra-operator/vidra/internal/runtime/version"
	"github.com/vidra-operator/vidra/internal/source/helmrender"
)

// Cluster providers.
const (
	// ProviderSecret enrolls clusters by labeled kubeconfig Secrets.
	ProviderSecret = "secret"
	// ProviderNone runs standalone: only the local cluster, no Secret is read.
	ProviderNone = "none"
)

// DefaultNamespace is the operator's namespace when none is given.
const DefaultNamespace = "vidra-system"

// Options are everything the operator is built from: the binary's flags set them, and
// tests start from the same defaults.
type Options struct {
	// Logger logs for the operator and its manager.
	Logger logr.Logger
	// Metrics registers the operator's metrics; nil: controller-runtime's registry, which
	// the metrics endpoint serves.
	Metrics prometheus.Registerer

	// Connection to the hub (or, in standalone mode, the local cluster): every reconcile
	// writes its status there, so this bounds the delivery rate.
	HubQPS   float64
	HubBurst int

	// Serving: addresses of the metrics, probe and pprof endpoints ("0" disables one).
	MetricsBindAddress     string
	HealthProbeBindAddress string
	PprofBindAddress       string

	// High availability.
	LeaderElection          bool
	LeaderElectionNamespace string
	// LeaderElectionLeaseDuration is how long the leader's Lease outlives its last
	// renewal; LeaderElectionRenewDeadline how long the leader tries to renew it before
	// it steps down, ending the process; LeaderElectionRetryPeriod how often each
	// replica tries.
	LeaderElectionLeaseDuration, LeaderElectionRenewDeadline, LeaderElectionRetryPeriod time.Duration
	// Sharding splits the fleet across replicas, each cluster fenced by a Lease in
	// LeaderElectionNamespace; it needs LeaderElection and ProviderSecret.
	Sharding           bool
	ShardID            string
	ShardLeaseDuration time.Duration

	// The fleet: how clusters are enrolled and engaged.
	ClusterProvider        string
	ClusterSecretNamespace string
	KubeconfigPolicy       kubeconfig.Policy
	// ClusterQPS and ClusterBurst limit each engaged cluster's requests, all clients
	// together; QPS 0 sets no client-side limit.
	ClusterQPS   float64
	ClusterBurst int
	// ClusterRateLimiter, when set, gives each engaged cluster its limiter instead.
	ClusterRateLimiter   func(multicluster.ClusterName) flowcontrol.RateLimiter
	ClusterSyncTimeout   time.Duration
	ClusterProbeInterval time.Duration
	ClusterProbeTimeout  time.Duration
	TokenRenewalPoint    float64

	// Delivery: how VidraResources are reconciled.
	// HubID is this operator's identity in owners sets; empty: derived from the UID of
	// the hub's kube-system namespace.
	HubID               string
	DisableLocalCluster bool
	// LocalServiceAccount (NAMESPACE/NAME) is who bundles for the hub are applied as when
	// they name no ServiceAccount; empty: such bundles are refused. The operator's own
	// identity never applies a bundle.
	LocalServiceAccount string
	// RequiredAdmissionPolicies (validating/NAME,mutating/NAME) are the hub's admission
	// policies that record and check who asks for a delivery; while one of them or its
	// binding is missing, bundles that rely on them are refused. Empty: none are required
	// (standalone without the chart).
	RequiredAdmissionPolicies string
	ResyncInterval            time.Duration
	MaxConcurrentReconciles   int
	// MaxConcurrentReconcilesPerCluster bounds the workers one destination cluster holds
	// at once, so a slow cluster cannot hold them all (0: no bound). Without a fleet
	// (standalone, agent) there is one cluster, and no bound.
	MaxConcurrentReconcilesPerCluster int
	RequestTimeout                    time.Duration
	ReconcileOnEvents                 bool

	// The content store: large bundles kept on the hub.
	ContentNamespace   string
	ContentGracePeriod time.Duration

	// Infrahub: how InfrahubSyncs read it and hear from it. Webhooks are received only
	// with WebhookSecret set and WebhookBindAddress not "0".
	InfrahubSecretNamespace string
	InfrahubTimeout         time.Duration
	MaxConcurrentSyncs      int
	// MaxConcurrentSyncsPerSource bounds the syncs of one kind whose source is one server
	// (an Infrahub, a Git host, a registry, a Helm repository) that run at once, so a slow
	// or trickling one leaves the rest to the others (0: no bound).
	MaxConcurrentSyncsPerSource int
	// MaxConcurrentSyncsPerRequester bounds the syncs of one kind that one requester (who
	// last wrote their spec, as the requested-by stamp says) has running at once, so a
	// tenant whose syncs point at several slow servers leaves the rest to the others (0:
	// no bound).
	MaxConcurrentSyncsPerRequester int
	WebhookBindAddress             string
	WebhookSecret                  string

	// Alerts: the events waiting to be matched, and those waiting for each provider, at
	// most AlertQueueSize; an event equal to one sent to a provider within
	// AlertDedupeWindow is not sent again.
	AlertQueueSize    int
	AlertDedupeWindow time.Duration

	// PreviewClusters bounds the clusters one preview of a ref dry-runs at once.
	PreviewClusters int
	// ClusterInventory names the inventories whose clusters are enrolled beside the
	// labeled Secrets (cluster-api), read from ClusterInventoryNamespaces alone.
	ClusterInventory           []string
	ClusterInventoryNamespaces []string
	// PublishClusterProfiles, when set, is the namespace where a ClusterProfile of each
	// enrolled cluster is written, for other consumers of the Cluster Inventory API.
	PublishClusterProfiles string
	// Bounds of reading Infrahub, set by the operator's administrator and not by the
	// syncs, so that no Infrahub can exhaust the memory every sync of the hub shares:
	// the artifacts one sync lists, the bytes it downloads, the time its listing and
	// downloads take together, and the memory every sync's answers take at once (an
	// artifact weighs 8 times its size while decoded: the budget is also 8 times the
	// largest artifact delivered). 0: no bound (the binary refuses it).
	InfrahubSyncMaxArtifacts int
	InfrahubSyncMaxBytes     int64
	InfrahubSyncTimeout      time.Duration
	InfrahubMemoryBudget     int64

	// Sources: how GitSyncs, OCISyncs and HelmSyncs fetch. Checkouts and extracted
	// artifacts live on disk under SourceCacheDir, one per URL and revision, however many
	// syncs read them (empty: a new temporary directory, removed when the operator
	// stops), at most SourceCacheBytes of them. The bounds are the administrator's, not
	// the syncs': the size of a checkout on disk (.git included), of a downloaded
	// artifact, the files either may hold, and the bundle built from them (at most what
	// the content store keeps).
	SourceCacheDir       string
	SourceCacheBytes     int64
	GitMaxRepoBytes      int64
	OCIMaxArtifactBytes  int64
	SourceMaxFiles       int
	SourceMaxBundleBytes int64
	SourceTimeout        time.Duration
	// HelmMaxIndexBytes bounds a Helm repository's index.yaml, HelmMaxChartBytes a chart's
	// archive.
	HelmMaxIndexBytes int64
	HelmMaxChartBytes int64
	// HelmRender renders each chart in a child process bounded in memory and time (see
	// helmrender). Without a Command, charts render inside the operator, which only a
	// caller that trusts every chart should allow: the binary always sets one.
	HelmRender helmrender.Options

	// Pull mode. On the hub, AgentTimeout is how long a pull cluster's agent may stay
	// silent before its cluster is Unreachable. In an agent (NewAgent), AgentNamespace
	// holds the agent's Secret (vidra-agent-hub), content and history, and AgentHeartbeat
	// is how often it reports to the hub. Version is the binary's, which agents report and
	// the hub compares with its own.
	AgentTimeout   time.Duration
	AgentNamespace string
	AgentHeartbeat time.Duration
	Version        string
	// AgentTokenRenewalPoint is the fraction of its hub token's life after which an agent
	// renews it (hublink.DefaultRenewalPoint).
	AgentTokenRenewalPoint float64
	// WrapHubTransport, when set, wraps the transport of every request an agent makes to
	// its hub (watches, heartbeats, reports, token renewals): the bench counts them with it.
	WrapHubTransport func(http.RoundTripper) http.RoundTripper

	// SkipControllerNameValidation lets one process build the operator again after
	// stopping it, as tests do to play a restarted pod.
	SkipControllerNameValidation bool

	// agent, set by NewAgent, makes the operator the agent of a pull cluster.
	agent *hublink.Link
}

// DefaultOptions are the binary's defaults.
func DefaultOptions() Options {
	return Options{
		HubQPS:                  100,
		HubBurst:                200,
		MetricsBindAddress:      ":8080",
		HealthProbeBindAddress:  ":8081",
		PprofBindAddress:        "0",
		LeaderElectionNamespace: DefaultNamespace,
		ShardLeaseDuration:      15 * time.Second,
		ClusterProvider:         ProviderSecret,
		ClusterSecretNamespace:  DefaultNamespace,
		ClusterBurst:            100,
		ClusterSyncTimeout:      30 * time.Second,
		ClusterProbeInterval:    30 * time.Second,
		ClusterProbeTimeout:     5 * time.Second,
		TokenRenewalPoint:       2.0 / 3,
		ResyncInterval:          10 * time.Minute,
		MaxConcurrentReconciles: 10,
		// Half: a cluster whose webhooks sleep leaves the other half to the rest.
		MaxConcurrentReconcilesPerCluster: 5,
		RequestTimeout:                    30 * time.Second,
		ContentNamespace:                  DefaultNamespace,
		ContentGracePeriod:                10 * time.Minute,
		InfrahubSecretNamespace:           DefaultNamespace,
		InfrahubTimeout:                   30 * time.Second,
		MaxConcurrentSyncs:                4,
		// Half, as for clusters: a trickling Infrahub leaves two workers to the others.
		MaxConcurrentSyncsPerSource: 2,
		// One fewer than the workers: a tenant's syncs at many slow servers leave one to
		// the others, and one author's syncs (a hub with one pipeline) lose little.
		MaxConcurrentSyncsPerRequester: 3,
		WebhookBindAddress:             ":8090",
		AlertQueueSize:                 1000,
		AlertDedupeWindow:              5 * time.Minute,
		PreviewClusters:                8,
		// Far above any sync the tests and the docs describe (a few artifacts, the largest
		// 5 MiB; the client pages through 450), far below what would take the operator
		// down: a listing of 10,000 artifacts decodes in a few MiB, and 512 MiB is eight
		// artifacts of the largest size the content store takes, in one sync.
		InfrahubSyncMaxArtifacts: 10000,
		InfrahubSyncMaxBytes:     512 << 20,
		InfrahubSyncTimeout:      10 * time.Minute,
		// One artifact of 64 MiB, the most the content store takes, decoded at a time.
		InfrahubMemoryBudget: 512 << 20,

		// Flux's timings rather than controller-runtime's (15s, 10s, 2s): a hub slowed
		// for 10s by a fleet's engagement would otherwise end its leader, and with
		// --sharding every replica is a candidate carrying a share of the fleet.
		LeaderElectionLeaseDuration: 35 * time.Second,
		LeaderElectionRenewDeadline: 30 * time.Second,
		LeaderElectionRetryPeriod:   5 * time.Second,

		SourceCacheBytes:     1 << 30,
		GitMaxRepoBytes:      256 << 20,
		OCIMaxArtifactBytes:  128 << 20,
		SourceMaxFiles:       20000,
		SourceMaxBundleBytes: 32 << 20,
		SourceTimeout:        2 * time.Minute,
		HelmMaxIndexBytes:    32 << 20,
		HelmMaxChartBytes:    16 << 20,
		HelmRender: helmrender.Options{
			MaxMemory: helmrender.DefaultMaxMemory, Timeout: helmrender.DefaultTimeout, Processes: helmrender.DefaultProcesses,
		},

		AgentTimeout:   90 * time.Second,
		AgentNamespace: DefaultNamespace,
		AgentHeartbeat: 30 * time.Second,
		// An expired token cannot be renewed: renew early, survive long outages.
		AgentTokenRenewalPoint: hublink.DefaultRenewalPoint,
		Version:                version.Get(),
	}
}

// LeaderElectionID names the leader election Lease.
const LeaderElectionID = "vidra.infrahub.operators.com"

// ParseServiceAccount reads a ServiceAccount given as NAMESPACE/NAME; "" is none.
func ParseServiceAccount(s string) (types.NamespacedName, error) {
	if s == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("%q is not NAMESPACE/NAME of a ServiceAccount", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// protectedNamespaces are the operator's namespaces on the hub, which no bundle may touch.
func (o Options) protectedNamespaces() []string {
	var out []string
	for _, ns := range []string{o.LeaderElectionNamespace, o.ClusterSecretNamespace, o.ContentNamespace, o.InfrahubSecretNamespace} {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}
