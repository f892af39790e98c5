package fanout

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// concurrentWrites is how many VidraResources a delivery writes at once: a sync of a
// thousand clusters writes a thousand, and one after another they take minutes.
const concurrentWrites = 8

// AtOnce delivers every item to every one of its targets now, and returns their statuses
// and the revision of the content they make. Items are read from the source one after
// another; their VidraResources are written several at once (concurrentWrites), and
// what came of each item is recorded in the items' order.
func (d *Delivery) AtOnce(ctx context.Context, items []Item, targets []Target, previous map[string]vidrav1alpha1.BundleStatus) ([]vidrav1alpha1.BundleStatus, vidrav1alpha1.RolloutStatus) {
	st := d.revisionOf(items, previous)
	d.revision = strconv.FormatInt(st.Revision, 10)
	prepared := make([]*itemWrite, 0, len(items))
	var writes errgroup.Group
	writes.SetLimit(concurrentWrites)
	for _, it := range items {
		w := d.prepareWrites(ctx, it, targets, previous[it.ID])
		prepared = append(prepared, w)
		for i, vr := range w.vrs {
			writes.Go(func() error {
				w.errs[i] = d.write(ctx, vr)
				w.vrs[i] = nil // its content is not kept until every item is written
				return nil
			})
		}
	}
	_ = writes.Wait() // the writes' errors are their items'
	statuses := make([]vidrav1alpha1.BundleStatus, 0, len(items))
	for _, w := range prepared {
		statuses = append(statuses, d.finish(w))
	}
	d.recordFoldedEvents()
	if len(d.problems) > 0 {
		// The phase stays Completed: a switch to Progressive must not inherit a failure.
		st.Message = fmt.Sprintf("revision %d: not delivered everywhere: %s", st.Revision, d.problems[0])
	}
	return statuses, st
}

// itemWrite is an item's delivery between its preparation and its end: the
// VidraResources to write and what came of each write, or why it stopped before.
type itemWrite struct {
	it   Item
	prev vidrav1alpha1.BundleStatus
	st   vidrav1alpha1.BundleStatus
	// failed says why the item could not be delivered, before anything was written
	// ("": none); err is the error it came from, and problem whether it is one (an item
	// still generating is not).
	failed  string
	err     error
	problem bool
	// vrs are the VidraResources to write, and errs the error of each write.
	vrs  []*vidrav1alpha1.VidraResource
	errs []error
	// names are those of all its VidraResources, pinned those a rollback keeps from the
	// item's content, and related the one its Event names.
	names, pinned []string
	related       *vidrav1alpha1.VidraResource
}

// prepareWrites builds item it's VidraResources, one per target, with its content, and keeps
// them; whatever goes wrong, the VidraResources it had are kept as they were.
func (d *Delivery) prepareWrites(ctx context.Context, it Item, targets []Target, prev vidrav1alpha1.BundleStatus) *itemWrite {
	w := &itemWrite{it: it, prev: prev, st: vidrav1alpha1.BundleStatus{
		ID: it.ID, Name: it.Name, Target: it.Target, Revision: it.Revision, Definition: it.Definition,
		Checksum: prev.Checksum, Digest: prev.Digest, StableChecksum: prev.StableChecksum, StableDigest: prev.StableDigest,
		BuiltFrom: prev.BuiltFrom, VidraResources: prev.VidraResources, VidraResourceCount: prev.VidraResourceCount,
	}}
	existing := d.resourcesOf(it)
	stop := func(msg string, err error, problem bool) *itemWrite {
		for _, vr := range existing {
			d.keep[vr.Name] = true
		}
		w.failed, w.err, w.problem = msg, err, problem
		return w
	}
	if msg, generating := d.notReady(it); msg != "" {
		return stop(msg, nil, !generating)
	}
	targets, msg := d.targetsOf(it, targets)
	if msg != "" {
		return stop(msg, nil, true)
	}

	// Build the desired VidraResources; content is filled in below if any needs writing.
	desired := make([]*vidrav1alpha1.VidraResource, 0, len(targets))
	stale := false
	for _, t := range targets {
		vr := d.resource(it, t)
		desired = append(desired, vr)
		if cur := d.owned[vr.Name]; cur == nil || !d.holds(ctx, cur, it.Checksum) {
			stale = true
		}
	}
	body, err := d.content(ctx, it, existing, stale)
	if err != nil {
		return stop(err.Error(), err, true)
	}
	d.toWrite(ctx, w, desired, body)
	return w
}

// toWrite keeps the desired VidraResources with their content (body; nil: the content
// they hold) and sets w to write them, but those a rollback pins.
func (d *Delivery) toWrite(ctx context.Context, w *itemWrite, desired []*vidrav1alpha1.VidraResource, body *body) {
	if len(desired) > 0 {
		w.related = &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: desired[0].Name}}
	}
	for _, vr := range desired {
		w.names = append(w.names, vr.Name)
		d.keep[vr.Name] = true
		if cur := d.owned[vr.Name]; cur != nil && cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
			// A person rolled it back: it keeps its content until the rollout is resumed.
			if !d.holds(ctx, cur, w.it.Checksum) {
				w.pinned = append(w.pinned, fmt.Sprintf("%s (revision %s)", vr.Name, cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]))
			}
			continue
		}
		if body != nil {
			// Each its own: a write reads the API server's answer into its VidraResource.
			vr.Spec.Manifest, vr.Spec.Content = body.manifest, body.ref.DeepCopy()
		}
		if d.revision != "" {
			vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = d.revision
		}
		w.vrs = append(w.vrs, vr)
	}
	w.errs = make([]error, len(w.vrs))
}

// finish records what came of item w's delivery, and returns its status.
func (d *Delivery) finish(w *itemWrite) vidrav1alpha1.BundleStatus {
	st, it := w.st, w.it
	if w.failed != "" {
		st.Message = w.failed
		if w.problem {
			d.problem(it, w.failed, w.err)
		}
		return st
	}
	st.VidraResources, st.VidraResourceCount = w.names, 0 // bounded counts them
	if err := errors.Join(w.errs...); err != nil {
		for _, vr := range d.resourcesOf(it) {
			d.keep[vr.Name] = true // those of targets it no longer has too
		}
		st.Message = err.Error()
		d.problem(it, err.Error(), err)
		return st
	}
	// A stored content's digest is kept, so that a source that builds content per
	// cluster finds it again without building it (content fetched per item has none).
	st.Checksum, st.StableChecksum, st.BuiltFrom = it.Checksum, it.Checksum, it.BuiltFrom
	st.Digest, st.StableDigest = it.Digest, it.Digest
	if len(w.pinned) > 0 {
		st.Message = d.pinnedMessage(it.Checksum, w.pinned)
	}
	d.eventDelivered(it, w.prev, w.related, w.names)
	return st
}

// revisionOf numbers the listed content for a sync that delivers at once: the revision
// grows when an item's checksum changes, or an item comes or goes.
func (d *Delivery) revisionOf(items []Item, previous map[string]vidrav1alpha1.BundleStatus) vidrav1alpha1.RolloutStatus {
	checksums := map[string]string{}
	for _, it := range items {
		switch {
		case it.Unready == "":
			checksums[it.ID] = it.Checksum
		case previous[it.ID].Checksum != "":
			checksums[it.ID] = previous[it.ID].Checksum // still generating: what it delivers stays
		}
	}
	st := vidrav1alpha1.RolloutStatus{}
	if d.sync.Object.RolloutStatus() != nil {
		st = *d.sync.Object.RolloutStatus()
	}
	if hash := d.hashOf(checksums); hash != st.ContentHash {
		st.Revision++
		st.ContentHash = hash
		now := metav1.Now()
		st.StartedAt = &now
	}
	st.Phase, st.Wave, st.FailedClusters, st.WaveCompletedAt = vidrav1alpha1.RolloutCompleted, "", nil, nil
	st.StableRevision = st.Revision
	st.Message = fmt.Sprintf("revision %d: delivered to every cluster at once", st.Revision)
	return st
}
