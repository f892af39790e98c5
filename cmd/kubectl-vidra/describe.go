package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

// vidraResourceKind is the kind Events about a VidraResource name as regarding.kind.
const vidraResourceKind = "VidraResource"

type describeOptions struct {
	hub *genericclioptions.ConfigFlags
}

func newDescribeCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &describeOptions{hub: newHubFlags()}
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show one bundle (VidraResource): where it goes, its conditions, its objects and its recent events",
		Long: `Show one VidraResource the way kubectl describe would: its destination and the cluster it
resolved to, its state and last error in full, its conditions (Ready, Reconciling,
Stalled, Conflict, VMRollout) with their reasons and messages, the syncs it waits for
on its cluster (spec.dependsOn) and the variables its sync's postBuild built it with
(a Secret's value never shown), the progress of its VirtualMachine rollout, every object it owns on its cluster (kind, namespace/name), and
the Events the operator recorded about it, oldest first.`,
		Example: `  # Why is the bundle "hello" not ready?
  kubectl vidra describe hello

  # The same, on the hub of another kubeconfig context.
  kubectl vidra describe hello --context hub-prod`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), args[0], streams.Out, streams.ErrOut)
		},
	}
	o.hub.AddFlags(cmd.Flags())
	return cmd
}

func (o *describeOptions) run(ctx context.Context, name string, out, errOut io.Writer) error {
	hub, err := newHubClient(o.hub, errOut)
	if err != nil {
		return err
	}
	var vr vidrav1alpha1.VidraResource
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, &vr); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("VidraResource %q not found on the hub (list them with: %s get)", name, displayName)
		}
		return hubError(err, "get VidraResource "+name)
	}
	events, err := eventsAbout(ctx, hub, &vr)
	if apierrors.IsForbidden(err) {
		// The bundle's own status says most; a user who may not read Events still gets it.
		fmt.Fprintf(errOut, "Warning: Events not shown: %v\n", err)
	} else if err != nil {
		return err
	}
	return describeResource(out, &vr, events, time.Now())
}

// eventsAbout returns the Events regarding vr, oldest first. Events about a cluster-scoped
// object may be in any namespace (recorders use "default"), so every namespace is read,
// narrowed by the API server with a field selector.
func eventsAbout(ctx context.Context, hub client.Client, vr *vidrav1alpha1.VidraResource) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	selector := fields.Set{"regarding.kind": vidraResourceKind, "regarding.name": vr.Name}.AsSelector()
	if err := hub.List(ctx, &list, client.MatchingFieldsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("list Events regarding VidraResource %s: %w", vr.Name, err)
	}
	var events []eventsv1.Event
	for _, e := range list.Items {
		r := e.Regarding
		// An Event of an earlier VidraResource of the same name is not about this one.
		if r.Kind == vidraResourceKind && r.Name == vr.Name && (r.UID == "" || r.UID == vr.UID) {
			events = append(events, e)
		}
	}
	slices.SortStableFunc(events, func(a, b eventsv1.Event) int {
		return lastSeen(&a).Compare(lastSeen(&b))
	})
	return events, nil
}

// lastSeen is when an Event last happened, whichever API version recorded it.
func lastSeen(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// firstSeen is when a repeated Event first happened.
func firstSeen(e *eventsv1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedFirstTimestamp.IsZero():
		return e.DeprecatedFirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func describeResource(out io.Writer, vr *vidrav1alpha1.VidraResource, events []eventsv1.Event, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	describeSpecAndState(w, vr, now)
	describeConditions(w, vr.Status.Conditions, now)
	describeBuild(w, vr)
	fmt.Fprintf(w, "VM rollout:\t%s\n", rolloutSummary(vr.Status.VMRollout))
	describeObjects(w, vr.Status.ManagedResources)
	describeEvents(w, events, now)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write description: %w", err)
	}
	return nil
}

// describeSpecAndState writes who the VidraResource is, where it goes and how it is doing.
func describeSpecAndState(w io.Writer, vr *vidrav1alpha1.VidraResource, now time.Time) {
	s := vr.Status
	d := vr.Spec.Destination
	fmt.Fprintf(w, "Name:\t%s\n", vr.Name)
	fmt.Fprintf(w, "Labels:\t%s\n", labelList(vr.Labels))
	fmt.Fprintf(w, "Created:\t%s (%s ago)\n", vr.CreationTimestamp.UTC().Format(time.RFC3339), age(vr.CreationTimestamp, now))
	fmt.Fprintf(w, "Sync:\t%s\n", syncOfResource(vr))
	fmt.Fprintf(w, "Destination:\n")
	switch {
	case d.Cluster != "":
		fmt.Fprintf(w, "  Cluster:\t%s\n", d.Cluster)
	case d.Server != "" && d.Server != vidrav1alpha1.LocalClusterServer:
		fmt.Fprintf(w, "  Server:\t%s\n", d.Server)
	default:
		fmt.Fprintf(w, "  Cluster:\t(the hub itself)\n")
	}
	fmt.Fprintf(w, "  Namespace:\t%s\n", orNone(d.Namespace))
	fmt.Fprintf(w, "  Reconcile on events:\t%t\n", d.ReconcileOnEvents || vr.Spec.ReconcileOnEvents)
	fmt.Fprintf(w, "Cluster:\t%s\n", orNone(s.Cluster))
	fmt.Fprintf(w, "Suspended:\t%t\n", vr.Spec.Suspend)
	fmt.Fprintf(w, "State:\t%s\n", orNone(string(s.DeployState)))
	lastSync := "<never>"
	if s.LastSyncTime != nil {
		lastSync = fmt.Sprintf("%s (%s ago)", s.LastSyncTime.UTC().Format(time.RFC3339), age(*s.LastSyncTime, now))
	}
	fmt.Fprintf(w, "Last sync:\t%s\n", lastSync)
	fmt.Fprintf(w, "Last error:\t%s\n", orNone(singleLine(s.LastError)))
	fmt.Fprintf(w, "Generation:\t%d (observed: %d)\n", vr.Generation, s.ObservedGeneration)
}

func describeConditions(w io.Writer, conditions []metav1.Condition, now time.Time) {
	fmt.Fprintf(w, "Conditions:\n")
	if len(conditions) == 0 {
		fmt.Fprintf(w, "  %s\n", none)
		return
	}
	fmt.Fprintf(w, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE\n")
	for _, c := range conditions {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(c.LastTransitionTime, now), singleLine(c.Message))
	}
}

// describeObjects writes the objects it applied; STATUS is each one's kstatus on its
// cluster, as the operator last saw it.
func describeObjects(w io.Writer, objects []vidrav1alpha1.ManagedResource) {
	fmt.Fprintf(w, "Objects (%d):\n", len(objects))
	if len(objects) == 0 {
		fmt.Fprintf(w, "  %s\n", none)
		return
	}
	fmt.Fprintf(w, "  KIND\tNAMESPACE/NAME\tAPI VERSION\tSTATUS\tMESSAGE\n")
	for _, m := range objects {
		ref := m.Name
		if m.Namespace != "" {
			ref = m.Namespace + "/" + m.Name
		}
		st := m.Status
		if st == "" {
			st = "Unknown"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", m.Kind, ref, m.APIVersion, st, m.Message)
	}
}

func describeEvents(w io.Writer, events []eventsv1.Event, now time.Time) {
	fmt.Fprintf(w, "Events:\n")
	if len(events) == 0 {
		fmt.Fprintf(w, "  %s\n", none)
		return
	}
	fmt.Fprintf(w, "  TYPE\tREASON\tAGE\tFROM\tNOTE\n")
	for i := range events {
		e := &events[i]
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, eventAge(e, now), eventSource(e), singleLine(e.Note))
	}
}

func labelList(labels map[string]string) string {
	if len(labels) == 0 {
		return none
	}
	pairs := make([]string, 0, len(labels))
	for k, v := range labels {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

func rolloutSummary(r *vidrav1alpha1.VMRolloutStatus) string {
	if r == nil {
		return none
	}
	return fmt.Sprintf("%s, %d/%d updated, %d pending, %d unavailable, %d failed",
		orNone(string(r.Phase)), r.Updated, r.Total, r.Pending, r.Unavailable, r.Failed)
}

// eventAge reads as kubectl describe's: "12s", or "12s (x4 over 5m)" for a repeated Event.
func eventAge(e *eventsv1.Event, now time.Time) string {
	last := age(metav1.NewTime(lastSeen(e)), now)
	count := e.DeprecatedCount
	if e.Series != nil {
		count = e.Series.Count
	}
	if count > 1 {
		return fmt.Sprintf("%s (x%d over %s)", last, count, age(metav1.NewTime(firstSeen(e)), now))
	}
	return last
}

func eventSource(e *eventsv1.Event) string {
	if e.ReportingController != "" {
		return e.ReportingController
	}
	return orNone(e.DeprecatedSource.Component)
}

// syncOfResource names the sync that made a VidraResource, with the revision of its Git
// or OCI source it delivers.
func syncOfResource(vr *vidrav1alpha1.VidraResource) string {
	kind, name := vidrav1alpha1.SyncOf(vr.Labels)
	if name == "" {
		return none
	}
	if revision := history.SourceRevision(history.SyncSource(vr)); revision != "" {
		return fmt.Sprintf("%s %s (source %s)", kind.Kind, name, revision)
	}
	return kind.Kind + " " + name
}

// describeBuild writes what the bundle waits for on its cluster (its sync's dependsOn)
// and what it was built with (its sync's postBuild variables).
func describeBuild(w io.Writer, vr *vidrav1alpha1.VidraResource) {
	fmt.Fprintf(w, "Depends on:\t%s\n", dependencyList(vr.Spec.DependsOn))
	if c := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady); c != nil && c.Reason == vidrav1alpha1.ReasonDependencyNotReady {
		fmt.Fprintf(w, "  Waiting:\t%s\n", singleLine(c.Message))
	}
	vars := map[string]string{}
	if err := json.Unmarshal([]byte(vr.Annotations[vidrav1alpha1.BundleVariablesAnnotation]), &vars); err != nil || len(vars) == 0 {
		fmt.Fprintf(w, "Variables:\t%s\n", none)
		return
	}
	fmt.Fprintf(w, "Variables:\n")
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		fmt.Fprintf(w, "  %s\t%s\n", name, vars[name])
	}
}

func dependencyList(deps []vidrav1alpha1.SyncReference) string {
	if len(deps) == 0 {
		return none
	}
	names := make([]string, 0, len(deps))
	for _, d := range deps {
		names = append(names, d.Kind+" "+d.Name)
	}
	return strings.Join(names, ", ")
}
