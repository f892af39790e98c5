package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/vidra-operator/vidra/controllers/infrahubsync"
	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/controllers/vmrollout"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/history"
	"github.com/vidra-operator/vidra/internal/sharding"
)

// setupControllers registers Vidra's controllers with the manager.
func setupControllers(ctx context.Context, log logr.Logger, mgr mcmanager.Manager, provider clusterProvider, shard *sharding.Coordinator, metrics operatorMetrics, opts options) error {
	hubID, err := resolveHubID(ctx, mgr, opts.hubID)
	if err != nil {
		return err
	}
	resolver := destination.Resolver{DisableLocalCluster: opts.disableLocalCluster}
	if provider != nil {
		resolver.Fleet = provider
	}
	store, err := setupContentStore(log, mgr.GetLocalManager(), opts)
	if err != nil {
		return err
	}
	r := &vidraresource.Reconciler{
		Content:           store,
		Metrics:           metrics.resources,
		Hub:               mgr.GetLocalManager().GetClient(),
		HubReader:         mgr.GetLocalManager().GetAPIReader(),
		Manager:           mgr,
		Resolver:          resolver,
		HubID:             hubID,
		ResyncInterval:    opts.resyncInterval,
		ReconcileOnEvents: opts.reconcileOnEvents,
		RequestTimeout:    opts.requestTimeout,
		Recorder:          mgr.GetLocalManager().GetEventRecorder("vidra"),
		Watches:           vidraresource.NewDriftWatches(log.WithName("drift"), hubID),
		History: &history.History{
			Client: mgr.GetLocalManager().GetClient(), Reader: mgr.GetLocalManager().GetAPIReader(), Namespace: opts.contentNamespace,
		},
	}
	if provider != nil {
		r.Policies = provider
	}
	if shard != nil {
		r.Shard = shard
		shard.OnGained(r.ClusterGained)
		shard.OnLost(r.ClusterLost)
		// The leader reconciles what no fence covers: look at everything once elected.
		if err := mgr.GetLocalManager().Add(manager.RunnableFunc(func(ctx context.Context) error {
			r.RequeueAll(ctx)
			return nil
		})); err != nil {
			return fmt.Errorf("add requeue on election: %w", err)
		}
	}
	if err := r.SetupWithManager(opts.maxConcurrentReconciles); err != nil {
		return err
	}
	if err := setupVMRollout(mgr, hubID, shard, metrics.vms, opts); err != nil {
		return err
	}
	return setupInfrahubSync(log, mgr.GetLocalManager(), store, metrics.syncs, opts)
}

// setupContentStore returns the store of large bundles and runs its collector on the
// leader.
func setupContentStore(log logr.Logger, mgr ctrl.Manager, opts options) (*content.Store, error) {
	store := &content.Store{
		Client:    mgr.GetClient(),
		Reader:    mgr.GetAPIReader(),
		Namespace: opts.contentNamespace,
		Grace:     opts.contentGracePeriod,
	}
	collector := &content.Collector{
		Store: store,
		InUse: content.NamedByAny(content.NamedByVidraResources(mgr.GetClient()), content.NamedByInfrahubSyncs(mgr.GetClient()),
			history.Digests(mgr.GetAPIReader(), opts.contentNamespace)),
		Interval: max(opts.contentGracePeriod/4, time.Second),
		Log:      log.WithName("content"),
	}
	if err := mgr.Add(collector); err != nil {
		return nil, fmt.Errorf("add content collector: %w", err)
	}
	return store, nil
}

// setupInfrahubSync registers the InfrahubSync controller and, when a key is configured,
// the receiver of Infrahub's webhooks.
func setupInfrahubSync(log logr.Logger, mgr ctrl.Manager, store *content.Store, metrics *infrahubsync.Metrics, opts options) error {
	r := &infrahubsync.Reconciler{
		Hub:         mgr.GetClient(),
		HubReader:   mgr.GetAPIReader(),
		Namespace:   opts.infrahubSecretNamespace,
		HTTPTimeout: opts.infrahubTimeout,
		Content:     store,
		Recorder:    mgr.GetEventRecorder("vidra"),
		Metrics:     metrics,
	}
	if err := r.SetupWithManager(mgr, opts.maxConcurrentSyncs); err != nil {
		return err
	}
	if opts.webhookBindAddress == "0" || opts.webhookSecret == "" {
		log.Info("Infrahub webhooks are not received: set --infrahub-webhook-secret (and --webhook-bind-address) to receive them")
		return nil
	}
	receiver := &infrahubsync.Receiver{
		Addr:      opts.webhookBindAddress,
		Hub:       mgr.GetClient(),
		Secrets:   mgr.GetAPIReader(),
		KeySecret: types.NamespacedName{Namespace: opts.infrahubSecretNamespace, Name: opts.webhookSecret},
		Log:       log.WithName("webhook"),
		Metrics:   metrics,
	}
	if err := mgr.Add(receiver); err != nil {
		return fmt.Errorf("add webhook receiver: %w", err)
	}
	return nil
}

// resolveHubID returns the hub ID: the flag's, or the first 8 characters of the UID of the
// hub's kube-system namespace, which is stable for the life of the cluster.
func resolveHubID(ctx context.Context, mgr mcmanager.Manager, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	ns := &corev1.Namespace{}
	if err := mgr.GetLocalManager().GetAPIReader().Get(ctx, client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		return "", fmt.Errorf("derive the hub ID from namespace kube-system (or set --hub-id): %w", err)
	}
	return string(ns.UID)[:8], nil
}

// setupVMRollout registers the VirtualMachine rollout controller.
func setupVMRollout(mgr mcmanager.Manager, hubID string, shard *sharding.Coordinator, metrics *vmrollout.Metrics, opts options) error {
	r := &vmrollout.Reconciler{
		Hub:                 mgr.GetLocalManager().GetClient(),
		Manager:             mgr,
		HubID:               hubID,
		DisableLocalCluster: opts.disableLocalCluster,
		Recorder:            mgr.GetLocalManager().GetEventRecorder("vidra"),
		Metrics:             metrics,
	}
	if shard != nil {
		r.Shard = shard
	}
	return r.SetupWithManager(mgr, opts.maxConcurrentReconciles)
}
