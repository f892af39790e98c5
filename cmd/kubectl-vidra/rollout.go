package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func newRolloutCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "See and drive the rollout of an InfrahubSync's content across its clusters",
		Long: `An InfrahubSync with spec.rollout.strategy Progressive delivers each new revision of its
content wave by wave, gated by the health of the clusters it updated. These commands show
where it stands and let a person pause it, or resume it after a failure or a rollback.`,
	}
	cmd.AddCommand(newRolloutStatusCommand(streams), newRolloutPauseCommand(streams), newRolloutResumeCommand(streams))
	return cmd
}

func newRolloutStatusCommand(streams genericiooptions.IOStreams) *cobra.Command {
	hub := newHubFlags()
	cmd := &cobra.Command{
		Use:     "status SYNC",
		Short:   "Show where the rollout of an InfrahubSync stands, cluster by cluster",
		Example: `  kubectl vidra rollout status web`,
		Args:    cobra.ExactArgs(1),
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
	s, err := resolve(ctx, hub, "ihs/"+name)
	if err != nil {
		return err
	}
	ihs := s.sync
	strategy := vidrav1alpha1.RolloutAllAtOnce
	if ihs.Spec.Rollout != nil && ihs.Spec.Rollout.Strategy != "" {
		strategy = ihs.Spec.Rollout.Strategy
	}
	r := ihs.Status.Rollout
	if r == nil {
		fmt.Fprintf(out, "InfrahubSync %s (%s): no revision delivered yet\n", ihs.Name, strategy)
		return nil
	}
	fmt.Fprintf(out, "InfrahubSync %s (%s): revision %d %s", ihs.Name, strategy, r.Revision, r.Phase)
	if r.Wave != "" {
		fmt.Fprintf(out, " at wave %s", r.Wave)
	}
	fmt.Fprintf(out, ", %d of %d clusters updated\n", r.Updated, r.Total)
	if ihs.Spec.Rollout != nil && ihs.Spec.Rollout.Paused {
		fmt.Fprintln(out, "Paused by spec.rollout.paused: 'kubectl vidra rollout resume' continues it.")
	}
	if len(r.FailedClusters) > 0 {
		fmt.Fprintf(out, "Failed clusters: %s\n", strings.Join(r.FailedClusters, ", "))
	}
	if r.Message != "" {
		fmt.Fprintf(out, "%s\n", r.Message)
	}
	for _, a := range ihs.Status.Artifacts {
		if strings.HasPrefix(a.Message, "pinned") {
			fmt.Fprintf(out, "Artifact %s: %s\n", a.ID, a.Message)
		}
	}
	rows := make([][]string, 0, len(s.resources))
	for i := range s.resources {
		vr := &s.resources[i]
		pinned := vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]
		rows = append(rows, []string{
			orNone(vr.Spec.Destination.Cluster), vr.Name, orNone(vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation]),
			readiness(vr), orNone(pinned),
		})
	}
	fmt.Fprintln(out)
	return writeTable(out, []string{"CLUSTER", "VIDRARESOURCE", "SYNC REVISION", "READY", "PINNED"}, rows)
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
		Use:     "pause SYNC",
		Short:   "Stop a progressive rollout where it is: no more cluster is updated",
		Example: `  kubectl vidra rollout pause web`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newHubClient(hub, streams.ErrOut)
			if err != nil {
				return err
			}
			return setPaused(cmd.Context(), c, args[0], true, streams.Out)
		},
	}
	hub.AddFlags(cmd.Flags())
	return cmd
}

func setPaused(ctx context.Context, hub client.Client, name string, paused bool, out io.Writer) error {
	ihs := &vidrav1alpha1.InfrahubSync{}
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, ihs); err != nil {
		return hubError(err, "get InfrahubSync "+name)
	}
	if ihs.Spec.Rollout == nil || ihs.Spec.Rollout.Strategy != vidrav1alpha1.RolloutProgressive {
		if paused {
			return fmt.Errorf("InfrahubSync %s delivers all at once (spec.rollout.strategy is not Progressive): there is no rollout to pause; spec.suspend stops it whole", name)
		}
		return nil
	}
	if ihs.Spec.Rollout.Paused == paused {
		return nil
	}
	base := ihs.DeepCopy()
	ihs.Spec.Rollout.Paused = paused
	if err := hub.Patch(ctx, ihs, client.MergeFrom(base)); err != nil {
		return hubError(err, "patch InfrahubSync "+name)
	}
	if paused {
		fmt.Fprintf(out, "infrahubsync/%s rollout paused\n", name)
	}
	return nil
}

func newRolloutResumeCommand(streams genericiooptions.IOStreams) *cobra.Command {
	hub := newHubFlags()
	cmd := &cobra.Command{
		Use:   "resume SYNC",
		Short: "Resume a rollout: unpause it, retry failed clusters and release rollback pins",
		Long: `Resume the rollout of an InfrahubSync: spec.rollout.paused is set to false, clusters that
failed get another healthTimeout (a rollout that rolled back updates them again), and the
VidraResources a 'kubectl vidra rollback' pinned follow the sync again, so they receive
its newest content.`,
		Example: `  kubectl vidra rollout resume web`,
		Args:    cobra.ExactArgs(1),
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
	s, err := resolve(ctx, hub, "ihs/"+name)
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
	if err := setPaused(ctx, hub, name, false, out); err != nil {
		errs = append(errs, err)
	}
	ihs := s.sync
	base := ihs.DeepCopy()
	if ihs.Annotations == nil {
		ihs.Annotations = map[string]string{}
	}
	ihs.Annotations[vidrav1alpha1.ResumeRequestedAtAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	if err := hub.Patch(ctx, ihs, client.MergeFrom(base)); err != nil {
		errs = append(errs, hubError(err, "resume InfrahubSync "+name))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "infrahubsync/%s rollout resumed", name)
	if unpinned > 0 {
		fmt.Fprintf(out, "; %d pinned VidraResources follow it again", unpinned)
	}
	fmt.Fprintln(out)
	return nil
}
