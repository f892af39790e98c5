// Command vidra is the Vidra operator: it delivers manifests from Infrahub artifacts to a
// fleet of Kubernetes clusters through sigs.k8s.io/multicluster-runtime.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	// The release's image holds no CA bundle: the binary carries Mozilla's roots, used
	// only where the system offers none (a mounted bundle or SSL_CERT_FILE wins).
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/runtime/version"
	"github.com/vidra-operator/vidra/internal/source/helmrender"
	"github.com/vidra-operator/vidra/operator"
)

func main() {
	os.Exit(run(ctrl.SetupSignalHandler(), os.Args[1:], os.Stdout))
}

// run starts the operator and blocks until ctx ends; it returns the process exit code.
// stdout takes what the command prints (its version), never logs.
func run(ctx context.Context, args []string, stdout io.Writer) int {
	if len(args) > 0 && args[0] == helmrender.Command {
		return helmrender.Main(os.Stdin, os.Stdout, os.Stderr, args[1:])
	}
	opts, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if opts.showVersion {
		fmt.Fprintln(stdout, "vidra", version.Get())
		return 0
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
	setMemoryLimit(log, memlimit.FromCgroup)
	setGCPercent(log, os.Getenv("GOGC"))
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
	opts.operator.Logger = log
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the operator's binary, which renders charts: %w", err)
	}
	opts.operator.HelmRender.Command = []string{exe, helmrender.Command}
	newOperator := operator.New
	if opts.mode == modeAgent {
		newOperator = operator.NewAgent
	}
	op, err := newOperator(ctx, cfg, opts.operator)
	if err != nil {
		return err
	}
	return op.Start(ctx)
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
