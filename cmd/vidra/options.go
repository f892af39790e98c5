package main

import (
	"flag"
	"fmt"
	"os"

	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// options are the operator's command-line settings, grouped by concern.
type options struct {
	// Connection to the hub (or, in standalone mode, the local cluster).
	kubeconfig string

	// Serving.
	metricsBindAddress     string
	healthProbeBindAddress string

	// High availability.
	leaderElect             bool
	leaderElectionNamespace string

	// Logging: controller-runtime's zap flags (--zap-log-level, --zap-encoder, ...).
	logging crzap.Options
}

const leaderElectionID = "vidra.infrahub.operators.com"

// parseOptions reads args into options; -h prints the usage and returns flag.ErrHelp.
func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("vidra", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "",
		"Path to the kubeconfig of the hub cluster. Empty: $KUBECONFIG, then in-cluster config, then ~/.kube/config.")
	fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", ":8080",
		"Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&o.healthProbeBindAddress, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz endpoints bind to; 0 disables them.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader through a Lease so only one replica reconciles at a time.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", defaultNamespace(),
		"Namespace of the leader election Lease.")
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
	return o, nil
}

// defaultNamespace is the namespace the operator runs in: $POD_NAMESPACE (set by the
// chart through the downward API), else vidra-system.
func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "vidra-system"
}
