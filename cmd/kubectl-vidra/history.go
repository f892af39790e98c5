package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

// historyOptions are shared by history and rollback.
type historyOptions struct {
	hub       *genericclioptions.ConfigFlags
	namespace string
}

func (o *historyOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.namespace, "operator-namespace", "vidra-system", "The operator's namespace, where revisions are kept (its --content-namespace).")
	o.hub.AddFlags(cmd.Flags())
}

func newHistoryCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &historyOptions{hub: newHubFlags()}
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "List the revisions a VidraResource or a sync (InfrahubSync, GitSync, OCISync, HelmSync) delivered",
		Long: `List the revisions a VidraResource delivered (kept as ControllerRevisions in the operator's
namespace, spec.historyLimit of them): number, when, the content's digest, where it came
from, and how it ended when a newer one replaced it.

For a sync, list the revisions of its content (status.rollout.revision) with their
checksums and how many clusters received each; for a GitSync, an OCISync or a HelmSync,
also the revision of its source each delivered (main@sha1:<commit>, v1@sha256:<digest>,
a chart version such as 1.2.0).

NAME is looked up as a VidraResource, then as an InfrahubSync, a GitSync, an OCISync and
a HelmSync; vr/NAME, ihs/NAME (infrahubsync/NAME), gs/NAME (gitsync/NAME), ocis/NAME
(ocisync/NAME) or hs/NAME (helmsync/NAME) says which.`,
		Example: `  kubectl vidra history web-paris-1a2b3c4d5e
  kubectl vidra history ihs/web

  # Which commits did GitSync "web" deliver, and where?
  kubectl vidra history gitsync/web

  # Which chart versions did HelmSync "ingress" deliver?
  kubectl vidra history hs/ingress`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runHistory(cmd.Context(), args[0], streams.Out, streams.ErrOut)
		},
	}
	o.addFlags(cmd)
	return cmd
}

// open connects to the hub and finds what NAME names, and its revisions' keeper.
func (o *historyOptions) open(ctx context.Context, name string, errOut io.Writer) (client.Client, *subject, *history.History, error) {
	hub, err := newHubClient(o.hub, errOut)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := resolve(ctx, hub, name)
	if err != nil {
		return nil, nil, nil, err
	}
	return hub, s, &history.History{Client: hub, Reader: hub, Namespace: o.namespace}, nil
}

func (o *historyOptions) runHistory(ctx context.Context, name string, out, errOut io.Writer) error {
	_, s, h, err := o.open(ctx, name, errOut)
	if err != nil {
		return err
	}
	now := time.Now()
	if s.vr != nil {
		revisions, err := h.List(ctx, s.vr)
		if err != nil {
			return hubError(err, "history")
		}
		if len(revisions) == 0 {
			fmt.Fprintf(out, "VidraResource %s has no revision kept (spec.historyLimit %s)\n", s.vr.Name, limitOf(s.vr))
			return nil
		}
		rows := make([][]string, 0, len(revisions))
		for i, r := range revisions {
			result := r.Result
			if i == len(revisions)-1 {
				result = currentResult(s.vr)
			}
			rows = append(rows, []string{strconv.FormatInt(r.Number, 10), age(metav1.NewTime(r.Recorded), now), shortDigest(r.Digest), orNone(r.Source), orNone(result)})
		}
		return writeTable(out, []string{"REVISION", "AGE", "DIGEST", "SOURCE", "RESULT"}, rows)
	}
	return o.syncHistory(ctx, h, s, out, now)
}

func newRollbackCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &historyOptions{hub: newHubFlags()}
	var to int64
	cmd := &cobra.Command{
		Use:   "rollback NAME [--to-revision N]",
		Short: "Deliver an earlier revision of a VidraResource, or of all of a sync's",
		Long: `Deliver revision N again (by default the one before the current). The revision's content
is written back to the VidraResource, which applies it as any change: objects the newer
revision added are released, and nothing another owner uses is deleted.

A VidraResource that a sync (InfrahubSync, GitSync, OCISync or HelmSync) made is pinned: the sync
leaves its content alone, and says its source has newer content, until
'kubectl vidra rollout resume SYNC'. Rolling back a sync pins each of its VidraResources
to the newest revision they kept of the sync's revision N (status.rollout.revision; by
default the one before the current).

NAME is looked up as a VidraResource, then as each kind of sync; vr/NAME, ihs/NAME,
gs/NAME (gitsync/NAME), ocis/NAME (ocisync/NAME) or hs/NAME (helmsync/NAME) says which.`,
		Example: `  kubectl vidra rollback web-paris-1a2b3c4d5e
  kubectl vidra rollback ihs/web --to-revision 3

  # Back to the commit GitSync "web" delivered before.
  kubectl vidra rollback gitsync/web`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runRollback(cmd.Context(), args[0], to, streams.Out, streams.ErrOut)
		},
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "The revision to deliver; 0 is the one before the current.")
	o.addFlags(cmd)
	return cmd
}

func (o *historyOptions) runRollback(ctx context.Context, name string, to int64, out, errOut io.Writer) error {
	hub, s, h, err := o.open(ctx, name, errOut)
	if err != nil {
		return err
	}
	if s.vr != nil {
		var r history.Revision
		if to == 0 {
			r, err = h.Previous(ctx, s.vr)
		} else {
			r, err = h.Get(ctx, s.vr, to)
		}
		if err != nil {
			return err
		}
		if err := history.Restore(ctx, hub, s.vr, r); err != nil {
			return err
		}
		fmt.Fprintf(out, "vidraresource/%s rolled back to revision %d%s\n", s.vr.Name, r.Number, pinNote(s.vr))
		return nil
	}
	return o.rollbackSync(ctx, hub, h, s, to, out)
}

func pinNote(vr *vidrav1alpha1.VidraResource) string {
	if kind, sync := vidrav1alpha1.SyncOf(vr.Labels); sync != "" {
		return fmt.Sprintf("; pinned: %s %s leaves it there until 'kubectl vidra rollout resume %s'", kind.Kind, sync, kind.Ref(sync))
	}
	return ""
}

// currentResult is how the revision delivered now stands, by its reason alone.
func currentResult(vr *vidrav1alpha1.VidraResource) string {
	return firstWord(history.CurrentResult(vr)) + " (current)"
}

func limitOf(vr *vidrav1alpha1.VidraResource) string {
	if vr.Spec.HistoryLimit == nil {
		return "10"
	}
	return strconv.Itoa(int(*vr.Spec.HistoryLimit))
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return orNone(d)
}

func joinKeys(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return orNone(strings.Join(keys, ","))
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, ":")
	w, _, _ = strings.Cut(w, " ")
	return w
}
