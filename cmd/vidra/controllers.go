package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/vidra-operator/vidra/controllers/vidraresource"
	"github.com/vidra-operator/vidra/internal/destination"
)

// setupControllers registers Vidra's controllers with the manager.
func setupControllers(ctx context.Context, log logr.Logger, mgr mcmanager.Manager, provider clusterProvider, opts options) error {
	hubID, err := resolveHubID(ctx, mgr, opts.hubID)
	if err != nil {
		return err
	}
	resolver := destination.Resolver{DisableLocalCluster: opts.disableLocalCluster}
	if provider != nil {
		resolver.Fleet = provider
	}
	metrics, err := vidraresource.NewMetrics(crmetrics.Registry)
	if err != nil {
		return err
	}
	r := &vidraresource.Reconciler{
		Metrics:        metrics,
		Hub:            mgr.GetLocalManager().GetClient(),
		HubReader:      mgr.GetLocalManager().GetAPIReader(),
		Manager:        mgr,
		Resolver:       resolver,
		HubID:          hubID,
		ResyncInterval: opts.resyncInterval,
		RequestTimeout: opts.requestTimeout,
		Recorder:       mgr.GetLocalManager().GetEventRecorder("vidra"),
		Watches:        vidraresource.NewDriftWatches(log.WithName("drift"), hubID),
	}
	return r.SetupWithManager(opts.maxConcurrentReconciles)
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
