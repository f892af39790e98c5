package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// exitError ends the plugin with a code of its own, without printing an error: as kubectl
// diff exits 1 when there are changes.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit code %d", e.code) }

func newDiffCommand(streams genericiooptions.IOStreams) *cobra.Command {
	hub := newHubFlags()
	cmd := &cobra.Command{
		Use:   "diff NAME",
		Short: "Show what a pending revision (or a dry run) would change on its cluster",
		Long: `Print the preview the operator computed, by server-side dry-run on the destination cluster,
of content waiting for a VidraResource: objects to create, update (a diff of their YAML,
Secret values redacted), prune, and those unchanged. A progressive rollout sets it on the
clusters whose wave is not reached yet; spec.dryRun: true previews a VidraResource's own
bundle and applies nothing.

NAME is a VidraResource, or a sync for the preview of each of its VidraResources: an
InfrahubSync (ihs/NAME), a GitSync (gs/NAME, gitsync/NAME), an OCISync (ocis/NAME,
ocisync/NAME) or a HelmSync (hs/NAME, helmsync/NAME); a bare NAME is looked up as a
VidraResource, then as each kind of sync.
As kubectl diff, it exits 0 when nothing would change, 1 when something
would (created, updated, pruned or released), and 2 on an error or when a preview failed
or could not be computed.`,
		Example: `  kubectl vidra diff web-paris-1a2b3c4d5e
  kubectl vidra diff ihs/web
  kubectl vidra diff gitsync/web
  kubectl vidra diff hs/web`,
		Args: oneArgAsDiff(streams),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newHubClient(hub, streams.ErrOut)
			if err != nil {
				return failDiff(streams.ErrOut, err)
			}
			s, err := resolve(cmd.Context(), c, args[0])
			if err != nil {
				return failDiff(streams.ErrOut, err)
			}
			vrs := s.resources
			if s.vr != nil {
				vrs = []vidrav1alpha1.VidraResource{*s.vr}
			}
			return exitOf(printPreviews(vrs, streams.Out, time.Now()))
		},
	}
	hub.AddFlags(cmd.Flags())
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return failDiff(streams.ErrOut, fmt.Errorf("%w\nSee '%s --help'", err, cmd.CommandPath()))
	})
	return cmd
}

// What the previews say, for the exit code.
type previewResult int

const (
	previewNoChanges previewResult = iota
	previewChanges
	// previewIncomplete: a preview failed, or was not computed: nothing can be promised.
	previewIncomplete
)

// oneArgAsDiff takes one argument, and fails as diff does without it.
func oneArgAsDiff(streams genericiooptions.IOStreams) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(1)(cmd, args); err != nil {
			return failDiff(streams.ErrOut, err)
		}
		return nil
	}
}

// exitOf ends a command that prints previews as kubectl diff ends.
func exitOf(result previewResult) error {
	switch result {
	case previewChanges:
		return exitError{code: 1}
	case previewIncomplete:
		return exitError{code: 2}
	}
	return nil
}

// failDiff prints err as the plugin does and ends with diff's error code, 2.
func failDiff(errOut io.Writer, err error) error {
	fmt.Fprintln(errOut, "error:", err)
	return exitError{code: 2}
}

// printPreviews prints each VidraResource's preview and says whether any would change
// something, or could not be computed.
func printPreviews(vrs []vidrav1alpha1.VidraResource, out io.Writer, now time.Time) previewResult {
	changes, incomplete := false, false
	for i := range vrs {
		vr := &vrs[i]
		p := vr.Status.Preview
		where := fmt.Sprintf("vidraresource/%s (cluster %s)", vr.Name, orNone(vr.Status.Cluster))
		if p == nil {
			fmt.Fprintf(out, "%s: no preview: nothing waits for it (spec.dryRun: true previews its own bundle)\n", where)
			continue
		}
		if p.ComputedAt == nil {
			fmt.Fprintf(out, "%s: no preview: %s\n", where, orNone(p.Message))
			incomplete = true
			continue
		}
		what := "its bundle (dry run)"
		if p.Revision != "" {
			what = "revision " + p.Revision
		}
		fmt.Fprintf(out, "%s, %s: %d to create, %d to update, %d to prune, %d unchanged", where, what, p.Create, p.Update, p.Prune, p.Unchanged)
		if p.Failed > 0 {
			fmt.Fprintf(out, ", %d refused by the dry-run", p.Failed)
		}
		fmt.Fprintf(out, " (computed %s ago)\n", age(metav1.NewTime(p.ComputedAt.Time), now))
		if p.ObservedGeneration != vr.Generation {
			fmt.Fprintln(out, "  (for an earlier spec: the operator has not previewed the current one yet)")
		}
		for _, c := range p.Changes {
			id := c.Kind + " " + c.Name
			if c.Namespace != "" {
				id = c.Kind + " " + c.Namespace + "/" + c.Name
			}
			fmt.Fprintf(out, "%s %s %s", symbolOf(c.Action), strings.ToLower(string(c.Action)), id)
			if c.Message != "" {
				fmt.Fprintf(out, ": %s", c.Message)
			}
			fmt.Fprintln(out)
			if c.Diff != "" {
				for line := range strings.SplitSeq(strings.TrimRight(c.Diff, "\n"), "\n") {
					fmt.Fprintf(out, "    %s\n", line)
				}
			}
		}
		if p.Message != "" {
			fmt.Fprintf(out, "  %s\n", p.Message)
		}
		released := slices.ContainsFunc(p.Changes, func(c vidrav1alpha1.PreviewChange) bool { return c.Action == vidrav1alpha1.PreviewRelease })
		changes = changes || p.Create+p.Update+p.Prune > 0 || released
		incomplete = incomplete || p.Failed > 0
	}
	switch {
	case incomplete:
		return previewIncomplete
	case changes:
		return previewChanges
	}
	return previewNoChanges
}

func symbolOf(a vidrav1alpha1.PreviewAction) string {
	switch a {
	case vidrav1alpha1.PreviewCreate:
		return "+"
	case vidrav1alpha1.PreviewUpdate:
		return "~"
	case vidrav1alpha1.PreviewPrune:
		return "-"
	case vidrav1alpha1.PreviewFailed:
		return "!"
	}
	return "="
}
