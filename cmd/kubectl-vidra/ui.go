package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/stdr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/vidra-operator/vidra/internal/ui"
)

type uiOptions struct {
	hub               *genericclioptions.ConfigFlags
	port              int
	operatorNamespace string
}

func newUICommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &uiOptions{hub: newHubFlags()}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a live web UI of the fleet on 127.0.0.1, with your own credentials",
		Long: `Serve a web UI of the fleet on 127.0.0.1 (never another address) and print its URL.

It reads the hub with your kubeconfig, as kubectl does: nothing runs in the cluster, no
credential is created, and each view shows only what your RBAC lets you read (a view
you may not read says so). Watches on the hub keep every page live.

Views: the fleet (clusters, their phase, version, labels, bundles ready, credential
expiry), the syncs of every kind (InfrahubSyncs, GitSyncs, OCISyncs, HelmSyncs: their
source and the revision fetched, bundles or artifacts, checksums, rollout progress, their
VidraResources, and a "Sync now" button that asks for a sync as you), one bundle (its
objects with their status, conditions, preview, history and Events), and the dependency
graph (syncs → VidraResources → clusters → objects, colored by health).

The clusters' view says, for each cluster and for the hub itself (local), whether you
may deliver there (the verb deliver on the VidraCluster's name; see kubectl vidra
can-deliver).

Only this browser tab gets in: the URL printed carries an access key in its fragment
(#key=…), which the page keeps in the tab's sessionStorage and sends with each request
(never in a cookie, which other services on 127.0.0.1 could read). Another tab, or
another user of this machine, must open the printed URL.

Every asset is in the binary: it works without network access beyond the hub.`,
		Example: `  # Serve on a free port and print the URL.
  kubectl vidra ui

  # A fixed port.
  kubectl vidra ui --port 8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), streams.Out, streams.ErrOut)
		},
	}
	o.hub.AddFlags(cmd.Flags())
	cmd.Flags().IntVar(&o.port, "port", 0, "The port on 127.0.0.1 to serve on (0: a free one).")
	cmd.Flags().StringVar(&o.operatorNamespace, "operator-namespace", "vidra-system", "The operator's namespace, where revision history is kept.")
	return cmd
}

func (o *uiOptions) run(ctx context.Context, out, errOut io.Writer) error {
	cfg, err := o.hub.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("hub connection: %w", err)
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	log := stdr.New(stdlog.New(errOut, "", stdlog.LstdFlags))
	server, err := ui.New(ctx, ui.Options{Config: cfg, Scheme: scheme, Log: log, OperatorNamespace: o.operatorNamespace})
	if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("listen on 127.0.0.1: %w", err)
	}
	srv := &http.Server{Handler: server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	// The key in the URL's fragment is what lets this browser in: the browser sends no
	// fragment to a server, and the page keeps the key in the tab, never in a cookie.
	fmt.Fprintf(out, "Vidra UI of %s on http://%s/#key=%s (Ctrl-C to stop)\n", cfg.Host, listener.Addr(), server.Key())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
