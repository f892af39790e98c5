package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
)

type previewOptions struct {
	ref              string
	contentNamespace string
}

func newPreviewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	hub := newHubFlags()
	o := &previewOptions{}
	cmd := &cobra.Command{
		Use:   "preview KIND/NAME --ref REF",
		Short: "Show what a branch or pull request would change on each cluster, before it merges",
		Long: `Print the preview the operator computed of a ref a GitSync's spec.previews names, or
of an Infrahub branch an InfrahubSync's names: its commit (or the branch's artifacts) built
as a merge would build it, dry-run on every cluster the sync reaches against
what the sync delivered there, nothing applied. Per cluster: objects to create, update (a
diff of their YAML, Secret values redacted), prune, and those unchanged, or why the
cluster refuses it.

REF is the full ref (refs/pull/42/head) or a branch (preview/web). As kubectl diff, it
exits 0 when nothing would change, 1 when something would, and 2 on an error or when a
cluster refuses the change or could not preview it.`,
		Example: `  kubectl vidra preview gitsync/web --ref preview/new-replicas
  kubectl vidra preview gs/web --ref refs/pull/42/head
  kubectl vidra preview ihs/sites --ref change-mtu`,
		Args: oneArgAsDiff(streams),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newHubClient(hub, streams.ErrOut)
			if err != nil {
				return failDiff(streams.ErrOut, err)
			}
			result, err := o.run(cmd.Context(), c, args[0], streams.Out)
			if err != nil {
				return failDiff(streams.ErrOut, err)
			}
			return exitOf(result)
		},
	}
	hub.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.ref, "ref", "", "The ref previewed: refs/pull/42/head, or a branch name.")
	cmd.Flags().StringVar(&o.contentNamespace, "content-namespace", "vidra-system", "The operator's content store namespace (its --content-namespace).")
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return failDiff(streams.ErrOut, fmt.Errorf("%w\nSee '%s --help'", err, cmd.CommandPath()))
	})
	return cmd
}

func (o *previewOptions) run(ctx context.Context, hub client.Client, arg string, out io.Writer) (previewResult, error) {
	if o.ref == "" {
		return 0, fmt.Errorf("--ref names the branch or pull request to show")
	}
	s, err := resolveSync(ctx, hub, arg)
	if err != nil {
		return 0, err
	}
	rp, err := o.find(s.sync)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(out, "%s %s, %s at %s: %d of %d clusters change: +%d ~%d -%d", s.sync.SyncKind().Kind, s.sync.GetName(), rp.Ref, rp.Revision,
		rp.Changed, rp.Clusters, rp.Added, rp.Updated, rp.Removed)
	if rp.Refused > 0 {
		fmt.Fprintf(out, ", %d refuse it", rp.Refused)
	}
	fmt.Fprintln(out)
	if rp.Message != "" {
		fmt.Fprintf(out, "  %s\n", rp.Message)
	}
	if rp.Digest == "" {
		return previewIncomplete, nil
	}
	store := &content.Store{Client: hub, Reader: hub, Namespace: o.contentNamespace}
	data, err := store.Get(ctx, rp.Digest)
	if err != nil {
		return 0, hubError(err, "read the clusters' previews "+rp.Digest+" in namespace "+o.contentNamespace)
	}
	var clusters []vidrav1alpha1.ClusterPreview
	if err := json.Unmarshal(data, &clusters); err != nil {
		return 0, fmt.Errorf("the clusters' previews %s: %w", rp.Digest, err)
	}
	vrs := make([]vidrav1alpha1.VidraResource, 0, len(clusters))
	for _, c := range clusters {
		if c.Skipped != "" {
			fmt.Fprintf(out, "cluster %s: not previewed: %s\n", c.Cluster, c.Skipped)
			continue
		}
		vr := vidrav1alpha1.VidraResource{}
		vr.Name, vr.Status.Cluster, vr.Status.Preview = c.VidraResource, c.Cluster, c.Preview
		if c.Preview != nil {
			vr.Generation = c.Preview.ObservedGeneration
		}
		vrs = append(vrs, vr)
	}
	return printPreviews(vrs, out, time.Now()), nil
}

// find is the sync's preview of the ref asked for: by full name, or as a branch.
func (o *previewOptions) find(sync vidrav1alpha1.Sync) (vidrav1alpha1.RefPreview, error) {
	kind, name := sync.SyncKind().Kind, sync.GetName()
	previews, patterns, ok := vidrav1alpha1.RefPreviews(sync)
	if !ok {
		return vidrav1alpha1.RefPreview{}, fmt.Errorf("%s %s previews no ref: a GitSync's or an InfrahubSync's spec.previews does", kind, name)
	}
	want := []string{o.ref, "refs/heads/" + o.ref}
	var known []string
	for _, rp := range previews {
		for _, w := range want {
			if rp.Ref == w {
				return rp, nil
			}
		}
		known = append(known, rp.Ref)
	}
	if patterns == nil {
		return vidrav1alpha1.RefPreview{}, fmt.Errorf("%s %s previews no ref: set spec.previews", kind, name)
	}
	return vidrav1alpha1.RefPreview{}, fmt.Errorf("%s %s has no preview of %s (previewed: %s; spec.previews: %s)",
		kind, name, o.ref, orNone(strings.Join(known, ", ")), strings.Join(patterns, ", "))
}
