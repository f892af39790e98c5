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

// lastErrorWidth keeps the LAST ERROR column to a terminal's width; describe shows it all.
const lastErrorWidth = 60

type getOptions struct {
	hub     *genericclioptions.ConfigFlags
	output  *outputFlags
	cluster string
}

func newGetCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &getOptions{hub: newHubFlags(), output: newOutputFlags(true, "a table")}
	cmd := &cobra.Command{
		Use:     "get [--cluster NAME]",
		Aliases: []string{"list", "vr"},
		Short:   "List the bundles (VidraResources) across the fleet and whether each is applied",
		Long: `List the VidraResources of the hub, one bundle of manifests for one cluster each:

  CLUSTER     the enrolled cluster the bundle goes to (as resolved by the operator, else
              as its spec.destination names it)
  STATE       Pending, Running, Succeeded, Failed or Stale
  OBJECTS     how many objects the bundle owns on its cluster
  READY       the Ready condition: True once applied and every object is current
  LAST ERROR  the last error met, cut to 60 characters (describe shows it whole)

-o wide adds AGE, VM ROLLOUT (phase and updated/total VirtualMachines) and SYNC (the sync
that made the bundle, as KIND/NAME: ihs/NAME for an InfrahubSync, gs/NAME for a GitSync,
ocis/NAME for an OCISync, hs/NAME for a HelmSync). -o yaml or -o json prints the
VidraResources.`,
		Example: `  # Every bundle of the fleet.
  kubectl vidra get

  # Only what goes to edge-1, with VM rollouts and the sync behind each bundle.
  kubectl vidra get --cluster edge-1 -o wide

  # The names of the bundles that are not ready, for a script.
  kubectl vidra get -o jsonpath='{range .items[?(@.status.DeployState!="Succeeded")]}{.metadata.name}{"\n"}{end}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), streams.Out, streams.ErrOut)
		},
	}
	cmd.Flags().StringVar(&o.cluster, "cluster", "", "Only the bundles that go to this enrolled cluster (status.cluster, else spec.destination.cluster).")
	o.hub.AddFlags(cmd.Flags())
	o.output.addFlags(cmd)
	return cmd
}

func (o *getOptions) run(ctx context.Context, out, errOut io.Writer) error {
	if err := o.output.validate(); err != nil {
		return err
	}
	hub, err := newHubClient(o.hub, errOut)
	if err != nil {
		return err
	}
	var list vidrav1alpha1.VidraResourceList
	if err := hub.List(ctx, &list); err != nil {
		return hubError(err, "list VidraResources")
	}
	var selected []*vidrav1alpha1.VidraResource
	for i := range list.Items {
		if vr := &list.Items[i]; o.cluster == "" || clusterOf(vr) == o.cluster {
			selected = append(selected, vr)
		}
	}

	if !o.output.table() {
		objs := make([]runtime.Object, 0, len(selected))
		for _, vr := range selected {
			objs = append(objs, vr)
		}
		return o.output.printList(out, hub.Scheme(), objs...)
	}
	if len(selected) == 0 {
		if o.cluster != "" {
			fmt.Fprintf(errOut, "No VidraResources go to cluster %q.\n", o.cluster)
		} else {
			fmt.Fprintln(errOut, "No VidraResources found.")
		}
		return nil
	}
	headers := []string{"NAME", "CLUSTER", "STATE", "OBJECTS", "READY", "LAST ERROR"}
	if o.output.wide() {
		headers = insertBefore(headers, "AGE", "VM ROLLOUT", "SYNC")
	}
	now := time.Now()
	rows := make([][]string, 0, len(selected))
	for _, vr := range selected {
		rows = append(rows, resourceRow(vr, now, o.output.wide()))
	}
	return writeTable(out, headers, rows)
}

// clusterOf is the cluster a VidraResource goes to: the one the operator resolved, or,
// before it has, the one the spec names.
func clusterOf(vr *vidrav1alpha1.VidraResource) string {
	if vr.Status.Cluster != "" {
		return vr.Status.Cluster
	}
	return vr.Spec.Destination.Cluster
}

func resourceRow(vr *vidrav1alpha1.VidraResource, now time.Time, wide bool) []string {
	s := vr.Status
	ready := none
	if c := meta.FindStatusCondition(s.Conditions, vidrav1alpha1.ConditionReady); c != nil {
		ready = string(c.Status)
	}
	row := []string{
		vr.Name, orNone(clusterOf(vr)), orNone(string(s.DeployState)), fmt.Sprint(s.ResourceCount), ready,
		truncate(singleLine(s.LastError), lastErrorWidth),
	}
	if wide {
		rollout := none
		if r := s.VMRollout; r != nil {
			rollout = fmt.Sprintf("%s %d/%d", orNone(string(r.Phase)), r.Updated, r.Total)
		}
		row = insertBefore(row, age(vr.CreationTimestamp, now), rollout, syncColumn(vr.Labels))
	}
	return row
}

// syncColumn names the sync that made a VidraResource with these labels, as the plugin's
// commands take it: "gs/web".
func syncColumn(labels map[string]string) string {
	kind, name := vidrav1alpha1.SyncOf(labels)
	if name == "" {
		return none
	}
	return kind.Ref(name)
}
