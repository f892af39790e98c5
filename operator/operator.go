// Package operator wires Vidra: from Options it builds the hub's manager, the cluster
// provider, the shard coordinator, the content store and every controller. The binary
// and the tests both call New, so the operator the tests run is the one users run.
package operator

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	k8sevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fleet/admissionguard"
	"github.com/vidra-operator/vidra/internal/fleet/sharding"
	"github.com/vidra-operator/vidra/internal/runtime/patientdial"
	operatorscheme "github.com/vidra-operator/vidra/internal/runtime/scheme"
	"github.com/vidra-operator/vidra/providers/secret"
)

// Operator is Vidra, set up and ready to start.
type Operator struct {
	// Manager runs everything below.
	Manager mcmanager.Manager
	// Provider engages enrolled clusters; nil in standalone mode.
	Provider *secret.Provider
	// Shard splits the fleet across replicas; nil unless sharded.
	Shard *sharding.Coordinator
	// HubID is this operator's identity in the owners sets of applied objects.
	HubID string
	// Watches are the VidraResource controller's drift watches.
	Watches *vidraresource.DriftWatches
	// Content is the content store of large bundles.
	Content *content.Store

	// guards check the hub's admission policies for every controller; nil: none required.
	guards *admissionguard.Checker
	// events records the controllers' Events, and passes them on to the Alerts.
	events k8sevents.EventRecorder
	// resources is the VidraResource controller, which dry-runs the syncs' previews.
	resources *vidraresource.Reconciler
	// temporarySourceCache is the source cache New made for want of --source-cache-dir,
	// removed when the operator stops: every run would leave one behind otherwise.
	temporarySourceCache string

	log logr.Logger
	// about says, in the log line that starts it, which operator this is.
	about []any
}

// New builds the operator against the hub whose client configuration is hub: nothing
// runs until Start.
func New(ctx context.Context, hub *rest.Config, opts Options) (_ *Operator, err error) {
	cfg := rest.CopyConfig(hub)
	// client-go's default of 5 requests a second to the hub was what bounded delivery
	// (make bench): each VidraResource reconcile writes its finalizer, inventory, status
	// and Events there.
	cfg.QPS, cfg.Burst = float32(opts.HubQPS), opts.HubBurst
	if opts.Metrics == nil {
		opts.Metrics = crmetrics.Registry
	}
	scheme, err := operatorscheme.New()
	if err != nil {
		return nil, err
	}
	cacheOpts := cacheOptions(opts, cfg)
	// The caches' watches wait at the dial for an API server that restarts, and resume as
	// it listens again rather than after client-go's back-off of up to a minute.
	if cacheOpts.HTTPClient, err = patientdial.HTTPClientFor(cfg); err != nil {
		return nil, err
	}
	local, err := manager.New(cfg, manager.Options{
		Scheme:                  scheme,
		Logger:                  opts.Logger,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		PprofBindAddress:        opts.PprofBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		LeaseDuration:           &opts.LeaderElectionLeaseDuration,
		RenewDeadline:           &opts.LeaderElectionRenewDeadline,
		RetryPeriod:             &opts.LeaderElectionRetryPeriod,
		// Stepping down ends the process at once, so a new leader never overlaps it.
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: &opts.SkipControllerNameValidation},
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	op := &Operator{log: opts.Logger}
	defer func() {
		if err != nil {
			op.removeTemporarySourceCache()
		}
	}()
	if op.HubID, err = resolveHubID(ctx, local.GetAPIReader(), opts.HubID); err != nil {
		return nil, err
	}
	if op.Shard, err = newShard(cfg, scheme, local.Elected(), opts); err != nil {
		return nil, err
	}
	if op.Provider, err = newClusterProvider(opts, scheme, op.Shard, op.HubID); err != nil {
		return nil, err
	}
	if op.Manager, err = withFleet(local, op.Provider, op.Shard); err != nil {
		return nil, err
	}
	if op.Provider != nil {
		if err := op.Provider.SetupWithManager(op.Manager); err != nil {
			return nil, err
		}
	}
	if err := op.setupControllers(opts); err != nil {
		return nil, err
	}
	if err := op.Manager.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add healthz check: %w", err)
	}
	if err := op.Manager.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add readyz check: %w", err)
	}
	op.about = []any{"host", cfg.Host, "hubID", op.HubID, "leaderElection", opts.LeaderElection,
		"clusterProvider", opts.ClusterProvider, "sharding", opts.Sharding, "shardID", shardID(op.Shard)}
	return op, nil
}

// Start runs the operator until ctx ends.
func (o *Operator) Start(ctx context.Context) error {
	o.log.Info("starting operator", o.about...)
	defer o.removeTemporarySourceCache()
	if err := o.Manager.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// removeTemporarySourceCache removes the source cache New made, if it made one: once the
// manager has stopped, nothing reads it.
func (o *Operator) removeTemporarySourceCache() {
	if o.temporarySourceCache == "" {
		return
	}
	if err := os.RemoveAll(o.temporarySourceCache); err != nil {
		o.log.Error(err, "remove the temporary source cache", "dir", o.temporarySourceCache)
	}
}
