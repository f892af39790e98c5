package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

type uninstallOptions struct {
	clusterFlags
	// memberContexts maps an enrolled cluster (its name, or its Secret's) to the
	// kubeconfig context of an admin of the member.
	memberContexts    map[string]string
	agentNamespace    string
	operatorNamespace string
	pruneWorkloads    bool
	deleteCRDs        bool
	timeout           time.Duration
}

const uninstallLong = `Uninstall Vidra from the fleet: every sync and VidraResource on the hub, every
enrolled cluster's side on the hub and, for the clusters you give a context of, on the
member; with --crds, Vidra's CRDs on the hub. It runs while the operator runs, which
releases what was delivered; the operator itself is then removed with helm uninstall.

What was delivered stays on the members, released: Vidra's marks (owners, field
manager's claims) are taken off each object, and nothing is deleted. With
--prune-workloads every delivered object is deleted instead, once no owner uses it.

In order:
  1. every sync (InfrahubSync, GitSync, OCISync, HelmSync) is suspended, so that none
     writes a VidraResource again;
  2. every VidraResource is told to release (prune: false) or, with --prune-workloads,
     to prune (prune: true); a pull cluster's agent is waited for until it has the change;
  3. every VidraResource is deleted, and waited for while the operator (or a pull
     cluster's agent) releases or prunes its objects; then the syncs are deleted;
  4. every enrolled cluster is unenrolled as kubectl vidra unenroll does: with a context
     from --member-context, its identity (or a pull cluster's agent, its rights, its
     copies and Vidra's CRDs there) is removed from the member first; without one, only
     the hub's side goes, and what stays on the member is reported;
  5. with --crds, Vidra's CRDs are deleted from the hub (nothing of theirs is left).

The report ends with what was left: the workloads (or what could not be pruned), what
stays on members without a context, and the operator's own Helm release. Run it again
after a failure: what is gone already is skipped.

Recommended order: kubectl vidra uninstall (with a context for every member), then
helm uninstall (the operator), then kubectl vidra uninstall --crds (the chart keeps its
CRDs, lest helm uninstall delete every object of their kinds).`

const uninstallExample = `  # Remove Vidra from the fleet, leaving what it delivered in place.
  kubectl vidra uninstall --hub-context hub \
    --member-context edge-1=edge-1-admin --member-context edge-2=edge-2-admin
  helm uninstall vidra -n vidra-system
  kubectl vidra uninstall --hub-context hub --crds

  # Remove Vidra and everything it delivered.
  kubectl vidra uninstall --hub-context hub --prune-workloads \
    --member-context edge-1=edge-1-admin`

func newUninstallCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &uninstallOptions{clusterFlags: newClusterFlags()}
	cmd := &cobra.Command{
		Use:     "uninstall",
		Short:   "Remove Vidra from the hub and every member, leaving what it delivered unless --prune-workloads",
		Long:    uninstallLong,
		Example: uninstallExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), streams.Out, streams.ErrOut)
		},
	}
	flags := cmd.Flags()
	flags.StringVar(&o.memberKubeconfig, "kubeconfig", "", "The kubeconfig file that holds the --member-context contexts (default: $KUBECONFIG, else ~/.kube/config).")
	flags.StringVar(o.hub.KubeConfig, "hub-kubeconfig", "", "The kubeconfig file of the hub (default: the --kubeconfig file, else $KUBECONFIG, else ~/.kube/config).")
	flags.StringVar(o.hub.Context, "hub-context", "", "The kubeconfig context of the hub (default: the current context of the hub's kubeconfig).")
	flags.StringVar(&o.secretNamespace, "secret-namespace", "vidra-system", "The namespace the operator reads enrollment Secrets from (its --cluster-secret-namespace).")
	flags.StringVar(&o.operatorNamespace, "operator-namespace", "vidra-system", "The namespace of the operator's Deployment, named in the report.")
	flags.StringToStringVar(&o.memberContexts, "member-context", nil, "CLUSTER=CONTEXT: the kubeconfig context of an admin of an enrolled cluster, to remove what enrollment made there (repeatable).")
	flags.StringVar(&o.agentNamespace, "agent-namespace", "vidra-system", "The agent namespace of the pull clusters on their members.")
	flags.BoolVar(&o.pruneWorkloads, "prune-workloads", false, "Delete what Vidra delivered (once no owner uses it) instead of leaving it in place.")
	flags.BoolVar(&o.deleteCRDs, "crds", false, "Delete Vidra's CRDs from the hub once nothing of theirs is left.")
	flags.DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long to wait for the operator and the agents at each step.")
	return cmd
}

// run takes the fleet apart in the order uninstallLong gives, then reports what it left.
func (o *uninstallOptions) run(ctx context.Context, out, errOut io.Writer) error {
	hub, err := o.connectHub(errOut)
	if err != nil {
		return err
	}
	r := &uninstallReport{out: out}
	if err := o.releaseBundles(ctx, hub, r); err != nil {
		return err
	}
	if err := o.unenrollClusters(ctx, hub, r, errOut); err != nil {
		return err
	}
	if o.deleteCRDs {
		if err := deleteHubCRDs(ctx, hub, r); err != nil {
			return err
		}
	} else {
		r.leave("Vidra's CRDs on the hub, which the chart keeps: once the operator is gone, kubectl vidra uninstall --crds")
	}
	o.reportOperator(ctx, hub, r)
	r.print()
	return nil
}

// uninstallReport prints each step as it is done, and what is left at the end.
type uninstallReport struct {
	out  io.Writer
	left []string
}

func (r *uninstallReport) done(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *uninstallReport) leave(format string, args ...any) {
	r.left = append(r.left, fmt.Sprintf(format, args...))
}

func (r *uninstallReport) print() {
	if len(r.left) == 0 {
		fmt.Fprintln(r.out, "\nNothing of Vidra's is left.")
		return
	}
	fmt.Fprintln(r.out, "\nLeft in place:")
	for _, l := range slices.Compact(r.left) {
		fmt.Fprintf(r.out, "  - %s\n", l)
	}
}

// reportOperator names the operator's Deployment (and Helm release) in what is left.
func (o *uninstallOptions) reportOperator(ctx context.Context, hub hubAccess, r *uninstallReport) {
	op, err := findHubOperator(ctx, hub.client, o.operatorNamespace)
	if err != nil {
		return
	}
	release := op.labels["app.kubernetes.io/instance"]
	if op.labels["app.kubernetes.io/managed-by"] == "Helm" && release != "" {
		r.leave("the operator, deployment %s: remove it with helm uninstall %s -n %s", op.deployment, release, o.operatorNamespace)
		return
	}
	r.leave("the operator, deployment %s", op.deployment)
}
