package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

type clustersOptions struct {
	hub    *genericclioptions.ConfigFlags
	output *outputFlags
}

func newClustersCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &clustersOptions{hub: newHubFlags(), output: newOutputFlags(true, "a table")}
	cmd := &cobra.Command{
		Use:     "clusters",
		Aliases: []string{"cluster", "vc"},
		Short:   "List the enrolled clusters: phase, mode, server, version, since when and why not engaged",
		Long: `List every cluster enrolled on the hub (every VidraCluster) with what the operator last
saw of it:

  PHASE       Pending (being engaged), Engaged (reachable, its controllers run),
              Unreachable (three probes in a row failed, or a pull cluster's agent
              went silent) or Rejected (its kubeconfig broke policy or could not be used)
  MODE        Push (the hub applies) or Pull (the cluster's agent fetches its bundles)
  SERVER      the API server URL from the cluster's kubeconfig (none for a pull cluster)
  VERSION     the Kubernetes version it reported last
  SINCE       how long it has been as shown: since a probe last changed its status
              (a probe that finds it unchanged writes nothing), or, for a pull
              cluster, since its agent last reported
  REASON      why it is in that phase, such as the policy rule a kubeconfig broke

-o wide adds AGE and the enrollment SECRET. -o yaml or -o json prints the VidraClusters.`,
		Example: `  # How is the fleet doing?
  kubectl vidra clusters

  # Which Secret enrolled each cluster?
  kubectl vidra clusters -o wide

  # The full status of every cluster, for scripts.
  kubectl vidra clusters -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), streams.Out, streams.ErrOut)
		},
	}
	o.hub.AddFlags(cmd.Flags())
	o.output.addFlags(cmd)
	return cmd
}

func (o *clustersOptions) run(ctx context.Context, out, errOut io.Writer) error {
	if err := o.output.validate(); err != nil {
		return err
	}
	hub, err := newHubClient(o.hub, errOut)
	if err != nil {
		return err
	}
	var list vidrav1alpha1.VidraClusterList
	if err := hub.List(ctx, &list); err != nil {
		return hubError(err, "list VidraClusters")
	}

	if !o.output.table() {
		objs := make([]runtime.Object, 0, len(list.Items))
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
		return o.output.printList(out, hub.Scheme(), objs...)
	}
	if len(list.Items) == 0 {
		fmt.Fprintln(errOut, "No clusters are enrolled; enroll one with: kubectl vidra enroll NAME --context CONTEXT")
		return nil
	}
	headers := []string{"NAME", "PHASE", "MODE", "SERVER", "VERSION", "SINCE", "REASON"}
	if o.output.wide() {
		headers = insertBefore(headers, "AGE", "SECRET")
	}
	now := time.Now()
	rows := make([][]string, 0, len(list.Items))
	for i := range list.Items {
		rows = append(rows, clusterRow(&list.Items[i], now, o.output.wide()))
	}
	return writeTable(out, headers, rows)
}

func clusterRow(vc *vidrav1alpha1.VidraCluster, now time.Time, wide bool) []string {
	s := vc.Status
	// Since when the cluster has been as shown: a probe that changed its status, or its
	// agent's last report.
	since := "<never>"
	if s.LastProbeTime != nil {
		since = age(*s.LastProbeTime, now)
	}
	if s.Agent != nil && s.Agent.LastHeartbeat != nil {
		since = age(*s.Agent.LastHeartbeat, now)
	}
	row := []string{vc.Name, orNone(string(s.Phase)), orNone(string(s.Mode)), orNone(s.Server), orNone(s.KubernetesVersion), since, clusterReason(vc)}
	if wide {
		secret := none
		if s.SecretRef != nil {
			secret = s.SecretRef.Namespace + "/" + s.SecretRef.Name
		}
		row = insertBefore(row, age(vc.CreationTimestamp, now), secret)
	}
	return row
}

// clusterReason is the operator's own explanation of the phase; the Ready condition's
// message stands in for it on a cluster that is not engaged, so a problem is never shown
// without its cause.
func clusterReason(vc *vidrav1alpha1.VidraCluster) string {
	if vc.Status.Message != "" {
		return singleLine(vc.Status.Message)
	}
	if vc.Status.Phase != vidrav1alpha1.ClusterEngaged {
		if ready := meta.FindStatusCondition(vc.Status.Conditions, vidrav1alpha1.ConditionReady); ready != nil {
			return singleLine(ready.Message)
		}
	}
	return ""
}
