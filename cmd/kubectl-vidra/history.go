package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/history"
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

// subject is what NAME names: a VidraResource, or an InfrahubSync and its VidraResources.
type subject struct {
	vr   *vidrav1alpha1.VidraResource
	sync *vidrav1alpha1.InfrahubSync
	// resources are the sync's VidraResources, by name.
	resources []vidrav1alpha1.VidraResource
}

// resolve finds NAME: "vidraresource/NAME" (vr/), "infrahubsync/NAME" (ihs/), or a bare
// name, looked up as a VidraResource first.
func resolve(ctx context.Context, hub client.Client, arg string) (*subject, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		kind, name = "", arg
	}
	switch strings.ToLower(kind) {
	case "", "vidraresource", "vidraresources", "vr":
		vr := &vidrav1alpha1.VidraResource{}
		err := hub.Get(ctx, client.ObjectKey{Name: name}, vr)
		if err == nil {
			return &subject{vr: vr}, nil
		}
		if kind != "" || !apierrors.IsNotFound(err) {
			return nil, hubError(err, "get VidraResource "+name)
		}
	case "infrahubsync", "infrahubsyncs", "ihs":
	default:
		return nil, fmt.Errorf("%q: name a VidraResource (vr/NAME) or an InfrahubSync (ihs/NAME)", arg)
	}
	ihs := &vidrav1alpha1.InfrahubSync{}
	if err := hub.Get(ctx, client.ObjectKey{Name: name}, ihs); err != nil {
		if apierrors.IsNotFound(err) && kind == "" {
			return nil, fmt.Errorf("no VidraResource or InfrahubSync is named %s", name)
		}
		return nil, hubError(err, "get InfrahubSync "+name)
	}
	var list vidrav1alpha1.VidraResourceList
	if err := hub.List(ctx, &list, client.MatchingLabels{vidrav1alpha1.InfrahubSyncLabel: name}); err != nil {
		return nil, hubError(err, "list the VidraResources of "+name)
	}
	s := &subject{sync: ihs}
	for _, vr := range list.Items {
		if metav1.IsControlledBy(&vr, ihs) {
			s.resources = append(s.resources, vr)
		}
	}
	slices.SortFunc(s.resources, func(a, b vidrav1alpha1.VidraResource) int { return strings.Compare(a.Name, b.Name) })
	return s, nil
}

func newHistoryCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &historyOptions{hub: newHubFlags()}
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "List the revisions a VidraResource or an InfrahubSync delivered",
		Long: `List the revisions a VidraResource delivered (kept as ControllerRevisions in the operator's
namespace, spec.historyLimit of them): number, when, the content's digest, where it came
from, and how it ended when a newer one replaced it.

For an InfrahubSync, list the revisions of its content (status.rollout.revision) with the
artifacts' checksums and how many clusters received each.

NAME is looked up as a VidraResource, then as an InfrahubSync; vr/NAME or ihs/NAME says
which.`,
		Example: `  kubectl vidra history web-paris-1a2b3c4d5e
  kubectl vidra history ihs/web`,
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

// syncRevision is one revision of a sync's content, as its VidraResources recorded it.
type syncRevision struct {
	number    int64
	recorded  time.Time
	checksums map[string]bool
	clusters  map[string]bool
	results   map[string]bool
}

func (o *historyOptions) syncHistory(ctx context.Context, h *history.History, s *subject, out io.Writer, now time.Time) error {
	byNumber := map[int64]*syncRevision{}
	for i := range s.resources {
		vr := &s.resources[i]
		revisions, err := h.List(ctx, vr)
		if err != nil {
			return hubError(err, "history of "+vr.Name)
		}
		for j, r := range revisions {
			n, err := strconv.ParseInt(r.SyncRevision, 10, 64)
			if err != nil {
				continue
			}
			sr := byNumber[n]
			if sr == nil {
				sr = &syncRevision{number: n, recorded: r.Recorded, checksums: map[string]bool{}, clusters: map[string]bool{}, results: map[string]bool{}}
				byNumber[n] = sr
			}
			if r.Recorded.Before(sr.recorded) {
				sr.recorded = r.Recorded
			}
			if _, sum, ok := strings.Cut(r.Source, "checksum "); ok {
				sr.checksums[sum] = true
			}
			sr.clusters[vr.Spec.Destination.Cluster] = true
			result := r.Result
			if j == len(revisions)-1 {
				result = currentResult(vr)
			}
			if result != "" {
				sr.results[firstWord(result)] = true
			}
		}
	}
	if len(byNumber) == 0 {
		fmt.Fprintf(out, "InfrahubSync %s has no revision kept yet\n", s.sync.Name)
		return nil
	}
	numbers := make([]int64, 0, len(byNumber))
	for n := range byNumber {
		numbers = append(numbers, n)
	}
	slices.Sort(numbers)
	rows := make([][]string, 0, len(numbers))
	for _, n := range numbers {
		sr := byNumber[n]
		rows = append(rows, []string{strconv.FormatInt(n, 10), age(metav1.NewTime(sr.recorded), now), joinKeys(sr.checksums), strconv.Itoa(len(sr.clusters)), joinKeys(sr.results)})
	}
	if r := s.sync.Status.Rollout; r != nil {
		fmt.Fprintf(out, "InfrahubSync %s: revision %d, %s\n", s.sync.Name, r.Revision, orNone(string(r.Phase)))
	}
	return writeTable(out, []string{"REVISION", "AGE", "CHECKSUMS", "CLUSTERS", "RESULT"}, rows)
}

func newRollbackCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &historyOptions{hub: newHubFlags()}
	var to int64
	cmd := &cobra.Command{
		Use:   "rollback NAME [--to-revision N]",
		Short: "Deliver an earlier revision of a VidraResource, or of all of an InfrahubSync's",
		Long: `Deliver revision N again (by default the one before the current). The revision's content
is written back to the VidraResource, which applies it as any change: objects the newer
revision added are released, and nothing another owner uses is deleted.

A VidraResource that an InfrahubSync made is pinned: the sync leaves its content alone,
and says Infrahub has newer content, until 'kubectl vidra rollout resume SYNC'. Rolling
back an InfrahubSync pins each of its VidraResources to the newest revision they kept of
the sync's revision N (status.rollout.revision; by default the one before the current).`,
		Example: `  kubectl vidra rollback web-paris-1a2b3c4d5e
  kubectl vidra rollback ihs/web --to-revision 3`,
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
	target := to
	if target == 0 {
		if s.sync.Status.Rollout == nil || s.sync.Status.Rollout.Revision < 2 {
			return fmt.Errorf("InfrahubSync %s has no revision before its current one", s.sync.Name)
		}
		target = s.sync.Status.Rollout.Revision - 1
	}
	var errs []error
	rolled := 0
	for i := range s.resources {
		vr := &s.resources[i]
		revisions, err := h.List(ctx, vr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// The newest revision it kept of the sync's revision target or earlier.
		var pick *history.Revision
		for j := range revisions {
			n, err := strconv.ParseInt(revisions[j].SyncRevision, 10, 64)
			if err == nil && n <= target && (pick == nil || revisions[j].Number > pick.Number) {
				pick = &revisions[j]
			}
		}
		if pick == nil {
			fmt.Fprintf(out, "vidraresource/%s kept no revision of InfrahubSync revision %d or earlier: left as it is\n", vr.Name, target)
			continue
		}
		if err := history.Restore(ctx, hub, vr, *pick); err != nil {
			errs = append(errs, err)
			continue
		}
		rolled++
		fmt.Fprintf(out, "vidraresource/%s (%s) rolled back to revision %d\n", vr.Name, orNone(vr.Spec.Destination.Cluster), pick.Number)
	}
	fmt.Fprintf(out, "infrahubsync/%s: %d VidraResources rolled back to its revision %d and pinned until 'kubectl vidra rollout resume %s'\n", s.sync.Name, rolled, target, s.sync.Name)
	return errors.Join(errs...)
}

func pinNote(vr *vidrav1alpha1.VidraResource) string {
	if sync := vr.Labels[vidrav1alpha1.InfrahubSyncLabel]; sync != "" {
		return fmt.Sprintf("; pinned: InfrahubSync %s leaves it there until 'kubectl vidra rollout resume %s'", sync, sync)
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
