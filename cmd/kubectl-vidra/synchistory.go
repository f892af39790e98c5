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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/history"
)

// syncRevision is one revision of a sync's content, as its VidraResources recorded it.
type syncRevision struct {
	number   int64
	recorded time.Time
	// sources are the revisions of a Git or OCI source it delivered (main@sha1:…).
	sources   map[string]bool
	checksums map[string]bool
	clusters  map[string]bool
	results   map[string]bool
}

// syncRevisions gathers, by the sync's revision number, what its VidraResources'
// histories recorded.
func syncRevisions(ctx context.Context, h *history.History, s *subject) (map[int64]*syncRevision, error) {
	byNumber := map[int64]*syncRevision{}
	for i := range s.resources {
		vr := &s.resources[i]
		revisions, err := h.List(ctx, vr)
		if err != nil {
			return nil, hubError(err, "history of "+vr.Name)
		}
		for j, r := range revisions {
			n, err := strconv.ParseInt(r.SyncRevision, 10, 64)
			if err != nil {
				continue
			}
			sr := byNumber[n]
			if sr == nil {
				sr = &syncRevision{number: n, recorded: r.Recorded,
					sources: map[string]bool{}, checksums: map[string]bool{}, clusters: map[string]bool{}, results: map[string]bool{}}
				byNumber[n] = sr
			}
			if r.Recorded.Before(sr.recorded) {
				sr.recorded = r.Recorded
			}
			current := j == len(revisions)-1
			source := r.SourceRevision
			if source == "" && current {
				// A revision delivered again by a rollback records the rollback as its
				// source; the VidraResource still names the source's revision.
				source = history.SourceRevision(history.SyncSource(vr))
			}
			if source != "" {
				sr.sources[source] = true
			}
			if _, sum, ok := strings.Cut(r.Source, "checksum "); ok {
				sr.checksums[sum] = true
			}
			sr.clusters[vr.Spec.Destination.Cluster] = true
			result := r.Result
			if current {
				result = currentResult(vr)
			}
			if result != "" {
				sr.results[firstWord(result)] = true
			}
		}
	}
	return byNumber, nil
}

// syncHistory lists the revisions of a sync's content; for a sync of a Git or OCI source,
// with the source's revision each delivered.
func (o *historyOptions) syncHistory(ctx context.Context, h *history.History, s *subject, out io.Writer, now time.Time) error {
	byNumber, err := syncRevisions(ctx, h, s)
	if err != nil {
		return err
	}
	if len(byNumber) == 0 {
		fmt.Fprintf(out, "%s has no revision kept yet\n", syncTitle(s.sync))
		return nil
	}
	numbers := make([]int64, 0, len(byNumber))
	withSources := false
	for n, sr := range byNumber {
		numbers = append(numbers, n)
		withSources = withSources || len(sr.sources) > 0
	}
	slices.Sort(numbers)
	headers := []string{"REVISION", "AGE", "CHECKSUMS", "CLUSTERS", "RESULT"}
	if withSources {
		headers = slices.Insert(headers, 2, "SOURCE")
	}
	rows := make([][]string, 0, len(numbers))
	for _, n := range numbers {
		sr := byNumber[n]
		row := []string{strconv.FormatInt(n, 10), age(metav1.NewTime(sr.recorded), now), joinKeys(sr.checksums), strconv.Itoa(len(sr.clusters)), joinKeys(sr.results)}
		if withSources {
			row = slices.Insert(row, 2, joinKeys(sr.sources))
		}
		rows = append(rows, row)
	}
	if r := s.sync.RolloutStatus(); r != nil {
		fmt.Fprintf(out, "%s: revision %d, %s%s\n", syncTitle(s.sync), r.Revision, orNone(string(r.Phase)), fetchedNote(s.sync))
	}
	return writeTable(out, headers, rows)
}

// fetchedNote says which revision a sync of a Git or OCI source fetched last.
func fetchedNote(sync vidrav1alpha1.Sync) string {
	if fetched := sync.Fetched(); fetched != nil && fetched.Revision != "" {
		return "; source at " + fetched.Revision
	}
	return ""
}

// rollbackSync pins each of the sync's VidraResources to the newest revision it kept of
// the sync's revision to (0: the one before the current) or earlier.
func (o *historyOptions) rollbackSync(ctx context.Context, hub client.Client, h *history.History, s *subject, to int64, out io.Writer) error {
	kind, title := s.sync.SyncKind(), syncTitle(s.sync)
	target := to
	if target == 0 {
		r := s.sync.RolloutStatus()
		if r == nil || r.Revision < 2 {
			return fmt.Errorf("%s has no revision before its current one", title)
		}
		target = r.Revision - 1
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
		var pick *history.Revision
		for j := range revisions {
			n, err := strconv.ParseInt(revisions[j].SyncRevision, 10, 64)
			if err == nil && n <= target && (pick == nil || revisions[j].Number > pick.Number) {
				pick = &revisions[j]
			}
		}
		if pick == nil {
			fmt.Fprintf(out, "vidraresource/%s kept no revision of %s revision %d or earlier: left as it is\n", vr.Name, title, target)
			continue
		}
		if err := history.Restore(ctx, hub, vr, *pick); err != nil {
			errs = append(errs, err)
			continue
		}
		rolled++
		fmt.Fprintf(out, "vidraresource/%s (%s) rolled back to revision %d%s\n", vr.Name, orNone(vr.Spec.Destination.Cluster), pick.Number, sourceNote(pick))
	}
	fmt.Fprintf(out, "%s: %d VidraResources rolled back to its revision %d and pinned until 'kubectl vidra rollout resume %s'\n",
		title, rolled, target, kind.Ref(s.sync.GetName()))
	return errors.Join(errs...)
}

// sourceNote names the source's revision a revision delivers, when a sync of a Git or OCI
// source made it.
func sourceNote(r *history.Revision) string {
	if r.SourceRevision == "" {
		return ""
	}
	return " (" + r.SourceRevision + ")"
}
