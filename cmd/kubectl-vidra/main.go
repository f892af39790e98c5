// Command kubectl-vidra is Vidra's kubectl plugin: it shows the fleet a Vidra hub manages
// (clusters and bundles) and enrolls clusters into it. It talks only to the hub, through
// the user's kubeconfig; no member credential is needed except to enroll a member.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	err := newRootCommand(streams).ExecuteContext(ctx)
	stop()
	var exit exitError
	if errors.As(err, &exit) {
		os.Exit(exit.code)
	}
	if err != nil {
		fmt.Fprintln(streams.ErrOut, "error:", err)
		os.Exit(1)
	}
}

// displayName is how users type the plugin: kubectl finds kubectl-vidra on the PATH and
// runs it for "kubectl vidra".
const displayName = "kubectl vidra"

const (
	rootLong = `Vidra is a Kubernetes operator that delivers manifests (from Infrahub artifacts, Git
repositories, OCI artifacts, Helm charts, or written inline) to a fleet of clusters and
keeps them in sync. This plugin reads the hub, the cluster where Vidra runs, through your
kubeconfig: which clusters are enrolled and how they are doing, which bundles
(VidraResources) went where and whether they are applied, and what each sync
(InfrahubSync, GitSync, OCISync, HelmSync) delivered.
It also enrolls a cluster by writing its kubeconfig Secret on the hub, and uploads bundles
too large to be inline to the hub's content store.

Every command reads the hub only; no member credential is needed, except the member's own
kubeconfig context when you enroll it.`

	rootExample = `  # Which clusters are enrolled, and are they reachable?
  kubectl vidra clusters

  # Which bundles went to edge-1, and did they apply?
  kubectl vidra get --cluster edge-1

  # Why is the bundle "hello" not ready?
  kubectl vidra describe hello

  # Enroll the cluster of kubeconfig context "edge-1-admin" as edge-1.
  kubectl vidra enroll edge-1 --context edge-1-admin --labels site=paris

  # May I deliver to edge-1? Where may I deliver?
  kubectl vidra can-deliver edge-1
  kubectl vidra can-deliver --list

  # Deliver a bundle of any size to edge-1.
  kubectl vidra upload argocd -f install.yaml --cluster edge-1 --namespace argocd

  # Where does the rollout of InfrahubSync "web" stand? Which revisions did it deliver?
  kubectl vidra rollout status web
  kubectl vidra history ihs/web

  # Which commits did GitSync "site" deliver? (ocis/NAME for an OCISync, hs/NAME for a HelmSync)
  kubectl vidra history gitsync/site

  # Which chart versions did HelmSync "ingress" deliver, and where?
  kubectl vidra history helmsync/ingress

  # Take GitSync "site" back to its previous commit, then let it go on.
  kubectl vidra rollback gs/site
  kubectl vidra rollout resume gs/site`
)

// newRootCommand builds the command tree; every command writes to streams only, so tests
// run the plugin in-process and read what a user would.
func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-vidra",
		Short:         "Vidra delivers Kubernetes manifests from Infrahub, Git, OCI or Helm charts to a fleet of clusters: see the fleet and enroll clusters",
		Long:          rootLong,
		Example:       rootExample,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: displayName},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	// A wrong flag is a typing mistake: say where the help is rather than print it all.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nSee '%s --help'", err, cmd.CommandPath())
	})
	// The generated completion scripts would complete "kubectl-vidra", not "kubectl vidra".
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(
		newClustersCommand(streams),
		newGetCommand(streams),
		newDescribeCommand(streams),
		newEnrollCommand(streams),
		newImportCommand(streams),
		newUnenrollCommand(streams),
		newUninstallCommand(streams),
		newUICommand(streams),
		newUploadCommand(streams),
		newHistoryCommand(streams),
		newRollbackCommand(streams),
		newRolloutCommand(streams),
		newDiffCommand(streams),
		newPreviewCommand(streams),
		newCanDeliverCommand(streams),
		newVersionCommand(streams),
	)
	return root
}
