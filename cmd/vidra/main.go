// Command vidra is the Vidra operator: it delivers manifests from Infrahub artifacts to a
// fleet of Kubernetes clusters through sigs.k8s.io/multicluster-runtime.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/kubeconfig"
	operatorscheme "github.com/vidra-operator/vidra/internal/scheme"
	"github.com/vidra-operator/vidra/internal/sharding"
	"github.com/vidra-operator/vidra/internal/tracing"
	"github.com/vidra-operator/vidra/providers/secret"
)

func main() {
	os.Exit(run(ctrl.SetupSignalHandler(), os.Args[1:]))
}

// run starts the operator and blocks until ctx ends; it returns the process exit code.
func run(ctx context.Context, args []string) int {
	opts, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	zapLogger := crzap.NewRaw(crzap.UseFlagOptions(&opts.logging))
	defer func() { _ = zapLogger.Sync() }()
	log := zapr.NewLogger(zapLogger)
	ctrl.SetLogger(log)
	klog.SetLogger(log) // client-go logs through the same JSON logger.

	if err := start(ctx, log, opts); err != nil {
		log.Error(err, "operator stopped with an error")
		return 1
	}
	return 0
}

func start(ctx context.Context, log logr.Logger, opts options) (retErr error) {
	stopTracing, err := tracing.Setup(ctx, tracing.Options{Endpoint: opts.otlpEndpoint})
	if err != nil {
		return err
	}
	defer func() {
		// Spans still buffered go out before the process ends.
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(flushCtx); err != nil {
			log.Error(err, "flush traces")
		}
	}()
	cfg, err := restConfig(opts.kubeconfig)
	if err != nil {
		return err
	}
	// client-go's default of 5 requests a second to the hub was what bounded delivery
	// (make bench): each VidraResource reconcile writes its finalizer, inventory, status
	// and Events there.
	cfg.QPS, cfg.Burst = float32(opts.hubQPS), opts.hubBurst
	scheme, err := operatorscheme.New()
	if err != nil {
		return err
	}

	local, err := manager.New(cfg, manager.Options{
		Scheme:                  scheme,
		Cache:                   hubCacheOptions(log, cfg),
		Metrics:                 metricsserver.Options{BindAddress: opts.metricsBindAddress},
		HealthProbeBindAddress:  opts.healthProbeBindAddress,
		PprofBindAddress:        opts.pprofBindAddress,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: opts.leaderElectionNamespace,
		// Stepping down ends the process at once, so a new leader never overlaps it.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	shard, err := newShard(log, cfg, scheme, local.Elected(), opts)
	if err != nil {
		return err
	}
	provider, err := newClusterProvider(log, opts, scheme, shard)
	if err != nil {
		return err
	}
	mgr, err := withFleet(local, provider, shard)
	if err != nil {
		return err
	}
	if provider != nil {
		if err := provider.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	metrics, err := registerMetrics(crmetrics.Registry, local.GetClient(), log.WithName("fleet-metrics"))
	if err != nil {
		return err
	}
	if err := setupControllers(ctx, log, mgr, provider, shard, metrics, opts); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add readyz check: %w", err)
	}

	log.Info("starting operator", "host", cfg.Host, "leaderElection", opts.leaderElect, "clusterProvider", opts.clusterProvider,
		"sharding", opts.sharding, "shardID", shardID(shard))
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// newClusterProvider returns the Secret-based cluster provider, or nil in standalone mode
// (--cluster-provider=none), where no Secret is ever read. (A nil *secret.Provider must not
// reach mcmanager.New as a non-nil interface, hence the interface return.)
func newClusterProvider(log logr.Logger, opts options, scheme *runtime.Scheme, shard *sharding.Coordinator) (clusterProvider, error) {
	if opts.clusterProvider == providerNone {
		return nil, nil
	}
	var owner secret.Shard
	if shard != nil {
		owner = shard
	}
	return secret.New(log.WithName("cluster-provider"), secret.Options{
		Shard:     owner,
		Namespace: opts.clusterSecretNamespace,
		Policy: kubeconfig.Policy{
			AllowExec:        opts.allowKubeconfigExec,
			ExecAllowlist:    opts.kubeconfigExecAllow,
			AllowInsecureTLS: opts.allowInsecureTLS,
		},
		QPS:               float32(opts.clusterQPS),
		Burst:             opts.clusterBurst,
		SyncTimeout:       opts.clusterSyncTimeout,
		ProbeInterval:     opts.clusterProbeInterval,
		ProbeTimeout:      opts.clusterProbeTimeout,
		TokenRenewalPoint: opts.tokenRenewalPoint,
		Scheme:            scheme,
		// Member caches hold only what Vidra manages, so memory follows Vidra's objects
		// rather than the size of each cluster.
		Cache: cache.Options{DefaultLabelSelector: managedSelector()},
	})
}

// clusterProvider is the cluster provider as the operator uses it.
type clusterProvider interface {
	multicluster.Provider
	multicluster.ProviderRunnable
	destination.Fleet
	vidraresource.PolicySource
	SetupWithManager(mcmanager.Manager) error
	ClusterGained(multicluster.ClusterName)
}

// restConfig loads the hub's client configuration from an explicit kubeconfig path, or
// else from $KUBECONFIG, the in-cluster service account, or ~/.kube/config.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("load hub client config: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// managedSelector selects the objects Vidra manages.
func managedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue})
}

// hubCacheOptions has the hub's cache hold only the VirtualMachines Vidra manages, as
// member caches do, when the hub serves them: naming a kind the hub does not serve would
// stop the manager from starting.
func hubCacheOptions(log logr.Logger, cfg *rest.Config) cache.Options {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return cache.Options{}
	}
	if _, err := dc.ServerResourcesForGroupVersion(kubevirtv1.GroupVersion.String()); err != nil {
		log.V(1).Info("the hub serves no KubeVirt VirtualMachines", "reason", err.Error())
		return cache.Options{}
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{&kubevirtv1.VirtualMachine{}: {Label: managedSelector()}}}
}
