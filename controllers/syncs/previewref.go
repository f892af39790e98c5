package syncs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

// previewRef builds what pinned (obj reading ref, listed at revision) delivers, as a merge
// would build it, and dry-runs it on each cluster obj reaches against what obj delivered
// there.
func (p *Previews) previewRef(ctx context.Context, obj, pinned Object, ref, revision string) vidrav1alpha1.RefPreview {
	p.yield(ctx)
	now := metav1.Now()
	rp := vidrav1alpha1.RefPreview{Ref: ref, Revision: revision, ComputedAt: &now}
	read, err := p.r.Kind.Read(ctx, pinned)
	if src := pinned.Fetched(); src != nil && src.Revision != "" {
		rp.Revision = src.Revision // the commit the ref names now
	}
	if read == nil || err != nil {
		rp.Message = fmt.Sprintf("not built: %v", err)
		if read != nil {
			read.Close()
		}
		return rp
	}
	defer read.Close()
	d, err := fanout.New(ctx, p.r.fanoutConfig(), p.r.Kind.Spec(pinned).Delivery, read)
	if err != nil {
		rp.Message = err.Error()
		return rp
	}
	targets, err := d.Destinations(ctx)
	if err != nil {
		rp.Message = err.Error()
		return rp
	}
	placed := d.Placements(read.Items(ctx, d, targets, previousBundles(obj)), targets)
	results := p.dryRunAll(ctx, read, placed, rp.Revision)
	summarize(&rp, results)
	data, err := json.Marshal(results)
	if err == nil && p.r.Content != nil {
		rp.Digest, err = p.r.Content.Put(ctx, data)
	}
	if err != nil {
		rp.Message = "the clusters' previews were not stored: " + err.Error()
	}
	return rp
}

// dryRunAll dry-runs each placement's content on its cluster, Clusters at once.
func (p *Previews) dryRunAll(ctx context.Context, read Read, placed []fanout.Placed, revision string) []vidrav1alpha1.ClusterPreview {
	results := make([]vidrav1alpha1.ClusterPreview, len(placed))
	slots := make(chan struct{}, max(p.Clusters, 1))
	var wg sync.WaitGroup
	for i, pl := range placed {
		results[i] = vidrav1alpha1.ClusterPreview{Cluster: pl.Cluster}
		if pl.Resource == nil {
			results[i].Skipped = "the sync delivers nothing there yet: a preview compares with what it delivered"
			continue
		}
		results[i].VidraResource = pl.Resource.Name
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			p.yield(ctx)
			data, err := read.Fetch(ctx, pl.Item)
			if err != nil {
				results[i].Preview = &vidrav1alpha1.PreviewStatus{Revision: revision, Message: "content: " + err.Error()}
				return
			}
			if results[i].Preview = p.DryRun.DryRun(ctx, pl.Resource, data, revision); results[i].Preview == nil {
				results[i].Skipped = "the cluster pulls its bundles: the hub does not reach it to dry-run"
			}
		}()
	}
	wg.Wait()
	return results
}

// Yielding: before each dry-run, a preview waits while a delivery runs, polling every
// yieldPoll, for at most maxYield: a fleet that never stops delivering still gets its
// previews, only later.
const (
	yieldPoll = 20 * time.Millisecond
	maxYield  = 2 * time.Second
)

// yield waits while a sync of the kind reads its source or the VidraResource
// controller delivers, up to maxYield.
func (p *Previews) yield(ctx context.Context) {
	deadline := time.Now().Add(maxYield)
	for (p.r.inFlight.Load() > 0 || p.DryRun.Delivering()) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(yieldPoll):
		}
	}
}

// summarize counts what the clusters' previews say: a cluster changes when something
// would be created, updated or pruned there; refuses when a preview of one of its
// bundles (an InfrahubSync delivers several to a cluster) was refused (its policy, its
// right), an object was refused by the dry-run, or one exists there that Vidra does not
// manage (the apply would leave it and fail).
func summarize(rp *vidrav1alpha1.RefPreview, results []vidrav1alpha1.ClusterPreview) {
	seen, changed, refused := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, c := range results {
		ps := c.Preview
		if ps == nil {
			continue
		}
		seen[c.Cluster] = true
		if ps.Failed > 0 || (ps.ComputedAt == nil && ps.Message != "") ||
			slices.ContainsFunc(ps.Changes, func(c vidrav1alpha1.PreviewChange) bool { return c.Action == vidrav1alpha1.PreviewNotManaged }) {
			refused[c.Cluster] = true
		}
		if ps.Create+ps.Update+ps.Prune > 0 {
			changed[c.Cluster] = true
		}
		rp.Added += ps.Create
		rp.Updated += ps.Update
		rp.Removed += ps.Prune
	}
	rp.Clusters, rp.Changed, rp.Refused = int32(len(seen)), int32(len(changed)), int32(len(refused))
}

// Counts says a preview as its commit status does: "3 clusters change: +2 ~5 -1".
func Counts(rp vidrav1alpha1.RefPreview) string {
	s := fmt.Sprintf("%d of %d clusters change: +%d ~%d -%d", rp.Changed, rp.Clusters, rp.Added, rp.Updated, rp.Removed)
	if rp.Refused > 0 {
		s += fmt.Sprintf(", %d refuse it", rp.Refused)
	}
	return s
}

// record records the preview as an Event on the sync, for its Alerts: PreviewReady,
// or PreviewFailed when a cluster refuses it or it could not be built, with the
// revision (the commit status it sets) and the counts.
func (p *Previews) record(obj Object, rp vidrav1alpha1.RefPreview) {
	eventType, reason, note := corev1.EventTypeNormal, vidrav1alpha1.EventPreviewReady, rp.Ref+" at "+rp.Revision+": "+Counts(rp)
	switch {
	case rp.Message != "" && rp.Clusters == 0:
		eventType, reason, note = corev1.EventTypeWarning, vidrav1alpha1.EventPreviewFailed, rp.Ref+": "+rp.Message
	case rp.Refused > 0:
		eventType, reason = corev1.EventTypeWarning, vidrav1alpha1.EventPreviewFailed
	}
	events.NewRecorder(p.r.Recorder, "Preview").RecordWith(obj, nil, eventType, reason, note, map[string]string{
		"revision": rp.Revision, "preview": Counts(rp), "ref": rp.Ref,
	})
}

// recordFailure tells, on the sync and to its Alerts, that its previews could not be
// made at all (its refs could not be listed): retried with backoff, each retry's Event
// folded into one by the recorder.
func (p *Previews) recordFailure(obj Object, err error) {
	events.NewRecorder(p.r.Recorder, "Preview").Record(obj, nil, corev1.EventTypeWarning, vidrav1alpha1.EventPreviewFailed, err.Error())
}
