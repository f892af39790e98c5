// Command vidra is the Vidra operator: it delivers manifests from Infrahub artifacts to a
// fleet of Kubernetes clusters through sigs.k8s.io/multicluster-runtime.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
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

func start(ctx context.Context, log logr.Logger, opts options) error {
	cfg, err := restConfig(opts.kubeconfig)
	if err != nil {
		return err
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}

	mgr, err := mcmanager.New(cfg, nil, manager.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.metricsBindAddress},
		HealthProbeBindAddress:  opts.healthProbeBindAddress,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: opts.leaderElectionNamespace,
		// Stepping down ends the process at once, so a new leader never overlaps it.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add readyz check: %w", err)
	}

	log.Info("starting operator", "host", cfg.Host, "leaderElection", opts.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
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

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("add client-go types to scheme: %w", err)
	}
	if err := vidrav1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("add Vidra types to scheme: %w", err)
	}
	return scheme, nil
}
