package main

import (
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorscheme "github.com/vidra-operator/vidra/internal/runtime/scheme"
)

// newHubFlags returns kubectl's own connection flags (--kubeconfig, --context, --as, …),
// with which the read commands reach the hub.
func newHubFlags() *genericclioptions.ConfigFlags {
	flags := genericclioptions.NewConfigFlags(true)
	// Every Vidra kind is cluster-scoped: a --namespace flag would only mislead.
	flags.Namespace = nil
	// Here a cluster is an enrolled cluster (get --cluster), not a kubeconfig entry.
	flags.ClusterName = nil
	// The controller-runtime client discovers kinds itself and keeps no disk cache.
	flags.CacheDir = nil
	return flags
}

// newScheme knows the kinds the operator knows: client-go's (Secrets, Events,
// ConfigMaps), Vidra's and KubeVirt's; and CRDs, which enroll --pull installs on the
// member and unenroll removes.
func newScheme() (*runtime.Scheme, error) {
	s, err := operatorscheme.New()
	if err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add apiextensions types to scheme: %w", err)
	}
	return s, nil
}

// newHubClient connects to the hub that getter's kubeconfig names, with newScheme's kinds
// (its Scheme() prints them).
func newHubClient(getter genericclioptions.RESTClientGetter, errOut io.Writer) (client.Client, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("hub connection: %w", err)
	}
	return hubClientFor(cfg, scheme, errOut)
}

// hubClientFor is a client of the hub at cfg. API warnings go to errOut, as kubectl shows
// them, instead of to a logger nobody configured.
func hubClientFor(cfg *rest.Config, scheme *runtime.Scheme, errOut io.Writer) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NewWarningWriter(errOut, rest.WarningWriterOptions{Deduplicate: true})
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("hub client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// hubError says what failed on the hub and, when the hub does not serve Vidra's kinds, that
// the kubeconfig likely points at the wrong cluster.
func hubError(err error, what string) error {
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("%s: %w (is this cluster a Vidra hub? check --kubeconfig/--context)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
