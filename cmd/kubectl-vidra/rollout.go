package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

// syncArgumentHelp says how the rollout commands read SYNC.
const syncArgumentHelp = `

SYNC is looked up as an InfrahubSync, then a GitSync, an OCISync and a HelmSync; ihs/NAME
(infrahubsync/NAME), gs/NAME (gitsync/NAME), ocis/NAME (ocisync/NAME) or hs/NAME
(helmsync/NAME) says which.`

func newRolloutCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "See and drive the rollout of a sync's content across its clusters",
		Long: `A sync (InfrahubSync, GitSync, OCISync or HelmSync) with spec.rollout.strategy Progressive delivers
each new revision of its content wave by wave, gated by the health of the clusters it
updated. These commands show where it stands and let a person pause it, or resume it
after a failure or a rollback.` + syncArgumentHelp,
	}
	cmd.AddCommand(newRolloutStatusCommand(streams), newRolloutPauseCommand(streams), newRolloutResumeCommand(streams))
	return cmd
}

func newRolloutStatusCommand(streams genericiooptions.IOStreams) *cobra.Command {
	hub := newHubFlags()
	cmd := &cobra.Command{
		Use:   "status SYNC",
		Short: "Show where the rollout of a sync stands, cluster by cluster",
		Long: `Show where the rollout of a sync stands: its revision, phase and wave, failed clusters,
and each VidraResource with the revision it delivers (for a GitSync, an OCISync or a
HelmSync, the commit, tag or chart version of its source too), its readiness, and whether a rollback pinned it.` + syncArgumentHelp,
		Example: `  kubectl vidra rollout status web
  kubectl vidra rollout status gitsync/web`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newHubClient(hub, streams.ErrOut)
			if err != nil {
				return err
			}
			return rolloutStatus(cmd.Context(), c, args[0], streams.Out)
		},
	}
	hub.AddFlags(cmd.Flags())
	return cmd
}

func rolloutStatus(ctx context.Context, hub client.Client, name string, out io.Writer) error {
	s, err := resolveSync(ctx, hub, name)
	if err != nil {
		return err
	}
	sync, title := s.sync, syncTitle(s.sync)
	spec := sync.RolloutSpec()
	strategy := vidrav1alpha1.RolloutAllAtOnce
	if spec != nil && spec.Strategy != "" {
		strategy = spec.Strategy
	}
	r := sync.RolloutStatus()
	if r == nil {
		fmt.Fprintf(out, "%s (%s): no revision delivered yet%s\n", title, strategy, fetchedNote(sync))
		return nil
	}
	fmt.Fprintf(out, "%s (%s): revision %d %s", title, strategy, r.Revision, r.Phase)
	if r.Wave != "" {
		fmt.Fprintf(out, " at wave %s", r.Wave)
	}
	fmt.Fprintf(out, ", %d of %d clusters updated%s\n", r.Updated, r.Total, fetchedNote(sync))
	if spec != nil && spec.Paused {
		fmt.Fprintf(out, "Paused by spec.rollout.paused: 'kubectl vidra rollout resume %s' continues it.\n", sync.SyncKind().Ref(sync.GetName()))
	}
	if len(r.FailedClusters) > 0 {
		fmt.Fprintf(out, "Failed clusters: %s\n", strings.Join(r.FailedClusters, ", "))
	}
	if r.Message != "" {
		fmt.Fprintf(out, "%s\n", r.Message)
	}
	for _, b := range sync.Bundles() {
		if strings.HasPrefix(b.Message, "pinned") {
			fmt.Fprintf(out, "Bundle %s: %s\n", b.ID, b.Message)
		}
	}
	fmt.Fprintln(out)
	headers, rows := rolloutTable(s.resources)
	return writeTable(out, headers, rows)
}

// rolloutTable lists the VidraResources of a sync, each with the revision of the sync's
// content it delivers and, for a sync of a Git or OCI source, that source's revision
// (SOURCE).
func rolloutTable(resources []vidrav1alpha1.VidraResource) ([]string, [][]string) {
	headers := []string{"CLUSTER", "VIDRARESOURCE", "SYNC REVISION", "READY", "PINNED"}
	rows := make([][]string, 0, len(resources))
	withSources := false
	for i := range resources {
		vr := &resources[i]
		source := history.SourceRevision(history.SyncSource(vr))
		withSources = withSources || source != ""
		rows = append(rows, []string{
			orNone(vr.Spec.Destination.Cluster), vr.Name, orNone(vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation]),
			orNone(source), readiness(vr), orNone(vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]),
		})
	}
	if withSources {
		return slices.Insert(headers, 3, "SOURCE"), rows
	}
	for i := range rows {
		rows[i] = slices.Delete(rows[i], 3, 4)
	}
	return headers, rows
}

func readiness(vr *vidrav1alpha1.VidraResource) string {
	ready := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	switch {
	case ready == nil || ready.ObservedGeneration != vr.Generation:
		return "Unknown"
	case ready.Status == metav1.ConditionTrue:
		return "True"
	}
	return "False (" + ready.Reason + ")"
}

func newRolloutPauseCommand(streams genericiooptions.IOStreams) *cobra.Command {
	hub := newHubFlags()
	cmd := &cobra.Command{
		Use:   "pause SYNC",
		Short: "Stop a progressive rollout where it is: no more cluster is updated",
		Long: `Pause the progressive rollout of a sync (spec.rollout.paused: true): the clusters
updated keep the new revision, the others wait for 'kubectl vidra rollout resume'.` + syncArgumentHelp,
		Example: `  kubectl vidra rollout pause web
  kubectl vidra rollout pause ocisync/web`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newHubClient(hub, streams.ErrOut)
			if err != nil {
				return err
			}
			return pause(cmd.Context(), c, args[0], streams.Out)
		},
	}
	hub.AddFlags(cmd.Flags())
	return cmd
}

// pause resolves SYNC and pauses its rollout.
func pause(ctx context.Context, hub client.Client, name string, out io.Writer) error {
	s, err := resolveSync(ctx, hub, name)
	if err != nil {
		return err
	}
	return setPaused(ctx, hub, s.sync, true, out)
}

// setPaused sets spec.rollout.paused of a sync of any kind: the field has the same path
// in each.
func setPaused(ctx context.Context, hub client.Client, sync vidrav1alpha1.Sync, paused bool, out io.Writer) error {
	spec := sync.RolloutSpec()
	if spec == nil || spec.Strategy != vidrav1alpha1.RolloutProgressive {
		if paused {
			return fmt.Errorf("%s delivers all at once (spec.rollout.strategy is not Progressive): there is no rollout to pause; spec.suspend stops it whole", syncTitle(sync))
		}
		return nil
	}
	if spec.Paused == paused {
		return nil
	}
	base, ok := sync.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("copy %s: not an object", syncTitle(sync))
	}
	spec.Paused = paused
	if err := hub.Patch(ctx, sync, client.MergeFrom(base)); err != nil {
		return hubError(err, "patch "+syncTitle(sync))
	}
	if paused {
		fmt.Fprintf(out, "%s rollout paused\n", kubectlName(sync))
	}
	return nil
}

// kubectlName names a sync as kubectl does: "gitsync/web".
func kubectlName(sync vidrav1alpha1.Sync) string {
	return strings.ToLower(sync.SyncKind().Kind) + "/" + sync.GetName()
}

func newRolloutResumeCommand(streams genericiooptions.IOStreams) *cobra.Command {
	hub := newHubFlags()
	cmd := &cobra.Command{
		Use:   "resume SYNC",
		Short: "Resume a rollout: unpause it, retry failed clusters and release rollback pins",
		Long: `Resume the rollout of a sync (InfrahubSync, GitSync, OCISync or HelmSync): spec.rollout.paused is
set to false, clusters that failed get another healthTimeout (a rollout that rolled back
updates them again), and the VidraResources a 'kubectl vidra rollback' pinned follow the
sync again, so they receive its newest content.` + syncArgumentHelp,
		Example: `  kubectl vidra rollout resume web
  kubectl vidra rollout resume gs/web`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newHubClient(hub, streams.ErrOut)
			if err != nil {
				return err
			}
			return resume(cmd.Context(), c, args[0], streams.Out)
		},
	}
	hub.AddFlags(cmd.Flags())
	return cmd
}

func resume(ctx context.Context, hub client.Client, name string, out io.Writer) error {
	s, err := resolveSync(ctx, hub, name)
	if err != nil {
		return err
	}
	var errs []error
	unpinned := 0
	for i := range s.resources {
		vr := &s.resources[i]
		if _, ok := vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]; !ok {
			continue
		}
		base := vr.DeepCopy()
		delete(vr.Annotations, vidrav1alpha1.PinnedRevisionAnnotation)
		if err := hub.Patch(ctx, vr, client.MergeFrom(base)); err != nil {
			errs = append(errs, hubError(err, "unpin "+vr.Name))
			continue
		}
		unpinned++
	}
	sync := s.sync
	if err := setPaused(ctx, hub, sync, false, out); err != nil {
		errs = append(errs, err)
	}
	// The annotation alone, as a merge patch: the same for every kind of sync.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		vidrav1alpha1.ResumeRequestedAtAnnotation: time.Now().UTC().Format(time.RFC3339Nano),
	}}})
	if err == nil {
		err = hub.Patch(ctx, sync, client.RawPatch(types.MergePatchType, patch))
	}
	if err != nil {
		errs = append(errs, hubError(err, "resume "+syncTitle(sync)))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s rollout resumed", kubectlName(sync))
	if unpinned > 0 {
		fmt.Fprintf(out, "; %d pinned VidraResources follow it again", unpinned)
	}
	fmt.Fprintln(out)
	return nil
}
