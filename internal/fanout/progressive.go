package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fanout/rollout"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// Progressive says whether a sync rolls new content out wave by wave.
func Progressive(spec *vidrav1alpha1.RolloutSpec) bool {
	return spec != nil && spec.Strategy == vidrav1alpha1.RolloutProgressive
}

// placement is one item's VidraResource on one cluster.
type placement struct {
	bundle  *rolloutBundle
	target  Target
	cluster string
	name    string
}

// rolloutBundle is one listed item of a progressive sync, with its newest and its
// stable content.
type rolloutBundle struct {
	item   Item
	status vidrav1alpha1.BundleStatus
	// included: its newest content is known and stored, so it takes part in the rollout.
	included bool
}

// Progressive delivers the items of a progressive sync: their newest content is kept in
// the content store, and each cluster gets it when its wave is reached and the budget
// allows; the others keep (and repair) what they have. It returns the items' statuses
// and the rollout's, nil when the rollout could not be planned (the status stays).
func (d *Delivery) Progressive(ctx context.Context, items []Item, dests []Target, previous map[string]vidrav1alpha1.BundleStatus) ([]vidrav1alpha1.BundleStatus, *vidrav1alpha1.RolloutStatus) {
	if d.cfg.Content == nil {
		d.stalled = "a progressive rollout keeps each revision in the content store, and this operator has none (--content-namespace)"
		return d.carryOver(items, previous), nil
	}
	clusterLabels, err := d.clusterLabels(ctx)
	if err != nil {
		d.problems = append(d.problems, err.Error())
		d.transient = err
		return d.carryOver(items, previous), nil
	}
	// The content of each item, the newest stored, and where it goes.
	bundles, places := d.prepareAll(ctx, items, dests, previous)
	// What the API shows of each cluster, and what the planner makes of it.
	plan, err := rollout.Decide(d.rolloutInput(ctx, bundles, places, clusterLabels))
	if err != nil {
		d.stalled = "rollout: " + err.Error()
		return d.carryOver(items, previous), nil
	}
	// Move the clusters as planned.
	m := d.move(ctx, places, plan)
	for _, e := range plan.Events {
		d.cfg.Events.Record(d.sync.Object, nil, e.Type, e.Reason, e.Note)
	}
	for _, w := range plan.Waves {
		d.observeWave(w)
	}
	d.requeue = plan.Requeue
	// Status: the rollout, and the stable content once a revision completed.
	st := plan.Status
	st.Message = conditions.Bounded(st.Message) // it names clusters and their reasons
	return d.statuses(bundles, m, plan.Completed), &st
}

// prepareAll prepares every item's content, and places those included on their targets.
func (d *Delivery) prepareAll(ctx context.Context, items []Item, dests []Target, previous map[string]vidrav1alpha1.BundleStatus) ([]*rolloutBundle, []placement) {
	var bundles []*rolloutBundle
	var places []placement
	for _, it := range items {
		ra := d.prepare(ctx, it, previous[it.ID])
		bundles = append(bundles, ra)
		if !ra.included {
			continue
		}
		targets, msg := d.targetsOf(it, dests)
		if msg != "" {
			ra.included = false
			ra.status.Message = msg
			d.problem(it, msg, nil)
			continue
		}
		for _, t := range targets {
			places = append(places, placement{bundle: ra, target: t, cluster: t.segment, name: it.resourceName(d.sync.Object.GetName(), t)})
		}
	}
	return bundles, places
}

// rolloutInput is what the planner decides from: the sync's rollout and what the API
// shows of each cluster.
func (d *Delivery) rolloutInput(ctx context.Context, bundles []*rolloutBundle, places []placement, clusterLabels map[string]map[string]string) rollout.Input {
	checksums := map[string]string{}
	hasStable := false
	for _, ra := range bundles {
		if ra.included {
			checksums[ra.item.ID] = ra.status.Checksum
			hasStable = hasStable || ra.status.StableDigest != ""
		}
	}
	in := rollout.Input{
		Spec: *d.sync.Object.RolloutSpec(), Hash: d.hashOf(checksums), HasStable: hasStable,
		Resume: d.sync.Object.GetAnnotations()[vidrav1alpha1.ResumeRequestedAtAnnotation], Now: d.cfg.Now(),
	}
	if d.sync.Object.RolloutStatus() != nil {
		in.Last = *d.sync.Object.RolloutStatus()
	}
	views := map[string]*rollout.Cluster{}
	var order []string
	for _, p := range places {
		v := views[p.cluster]
		if v == nil {
			v = &rollout.Cluster{Name: p.cluster, Labels: clusterLabels[p.cluster], Present: true, AtTarget: true, Healthy: true}
			views[p.cluster] = v
			order = append(order, p.cluster)
		}
		d.view(ctx, v, p)
	}
	for _, name := range order {
		in.Clusters = append(in.Clusters, *views[name])
	}
	return in
}

// view adds to v what the API shows of placement p's VidraResource.
func (d *Delivery) view(ctx context.Context, v *rollout.Cluster, p placement) {
	cur := d.owned[p.name]
	switch {
	case cur == nil:
		v.Present, v.AtTarget, v.Healthy = false, false, false
		return
	case cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "":
		v.Pinned = true
	}
	ok, why := healthy(cur)
	v.Unavailable = v.Unavailable || !ok
	v.Failing = v.Failing || (!ok && reconciled(cur))
	if !d.holds(ctx, cur, p.bundle.status.Checksum) {
		v.AtTarget, v.Healthy = false, false
		return
	}
	if t := updatedAt(cur); t.After(v.UpdatedAt) {
		v.UpdatedAt = t
	}
	if !ok {
		v.Healthy = false
		if v.Unhealthy == "" {
			v.Unhealthy = cur.Name + ": " + why
		}
	}
}

// moved is what moving the clusters did, by item.
type moved struct {
	// written are the VidraResources of each item.
	written map[*rolloutBundle][]string
	// pinnedBy are those a rollback holds while the source has newer content.
	pinnedBy map[*rolloutBundle][]string
	// lost: the newest content is gone from the store; it is fetched again next time.
	lost map[*rolloutBundle]bool
}

// move moves the clusters as planned.
func (d *Delivery) move(ctx context.Context, places []placement, plan rollout.Plan) moved {
	m := moved{written: map[*rolloutBundle][]string{}, pinnedBy: map[*rolloutBundle][]string{}, lost: map[*rolloutBundle]bool{}}
	now := d.cfg.Now().UTC().Format(time.RFC3339)
	for _, p := range places {
		d.movePlacement(ctx, p, plan, now, &m)
	}
	return m
}

// movePlacement moves one item's VidraResource on one cluster as planned: to the newest
// content, back to the stable one, or nowhere, with what waits for it.
func (d *Delivery) movePlacement(ctx context.Context, p placement, plan rollout.Plan, now string, m *moved) {
	cur := d.owned[p.name]
	if cur != nil {
		d.keep[p.name] = true
		m.written[p.bundle] = append(m.written[p.bundle], p.name)
	}
	if cur != nil && cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
		if !d.holds(ctx, cur, p.bundle.status.Checksum) {
			m.pinnedBy[p.bundle] = append(m.pinnedBy[p.bundle], fmt.Sprintf("%s (revision %s)", cur.Name, cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]))
		}
		return
	}
	st := p.bundle.status
	revision := strconv.FormatInt(plan.Status.Revision, 10)
	// Where the cluster's content goes now.
	var checksum, digest, contentRevision string
	switch plan.Moves[p.cluster] {
	case rollout.ToNewest:
		checksum, digest, contentRevision = st.Checksum, st.Digest, revision
	case rollout.ToStable:
		checksum, digest = st.StableChecksum, st.StableDigest
		if plan.Status.StableRevision > 0 {
			contentRevision = strconv.FormatInt(plan.Status.StableRevision, 10)
		}
		if digest == "" && cur != nil {
			// The item came with the failed revision: rolled back, it goes.
			delete(d.keep, p.name)
			return
		}
	}
	if digest != "" && cur != nil && d.holds(ctx, cur, checksum) {
		digest = "" // it has it already
	}
	if digest == "" && cur == nil {
		return
	}
	// What waits for it: the newest content, unless that is what it has or gets now.
	var pending *vidrav1alpha1.PendingContent
	if (digest != "" && checksum != st.Checksum) || (digest == "" && !d.holds(ctx, cur, st.Checksum)) {
		pending = d.waiting(ctx, st, revision)
	}
	var err error
	if digest == "" {
		err = d.setPending(ctx, p, cur, pending)
	} else {
		err = d.place(ctx, p, checksum, digest, contentRevision, now, pending)
	}
	if err != nil {
		d.problems = append(d.problems, err.Error())
		d.retry(err)
		if errors.Is(err, content.ErrUnavailable) && digest == st.Digest {
			m.lost[p.bundle] = true
		}
		return
	}
	if cur == nil {
		m.written[p.bundle] = append(m.written[p.bundle], p.name)
	}
}

// statuses are the items' statuses after the move; a completed revision's content
// becomes the stable one.
func (d *Delivery) statuses(bundles []*rolloutBundle, m moved, completed bool) []vidrav1alpha1.BundleStatus {
	out := make([]vidrav1alpha1.BundleStatus, 0, len(bundles))
	for _, ra := range bundles {
		s := ra.status
		if names, ok := m.written[ra]; ok {
			slices.Sort(names)
			s.VidraResources, s.VidraResourceCount = slices.Compact(names), 0 // bounded counts them
		}
		if completed && ra.included {
			s.StableChecksum, s.StableDigest = s.Checksum, s.Digest
		}
		if m.lost[ra] {
			s.Checksum, s.Digest = "", ""
		}
		if pinned := m.pinnedBy[ra]; len(pinned) > 0 {
			s.Message = d.pinnedMessage(s.Checksum, pinned)
		}
		out = append(out, s)
	}
	return out
}

// prepare finds an item's newest content (downloading it only when no VidraResource
// of the sync holds it) and stores it, and makes sure its stable content is stored.
func (d *Delivery) prepare(ctx context.Context, it Item, prev vidrav1alpha1.BundleStatus) *rolloutBundle {
	ra := &rolloutBundle{item: it, status: vidrav1alpha1.BundleStatus{
		ID: it.ID, Name: it.Name, Target: it.Target, Revision: it.Revision, Definition: it.Definition,
		Checksum: prev.Checksum, Digest: prev.Digest, StableChecksum: prev.StableChecksum, StableDigest: prev.StableDigest,
		BuiltFrom: prev.BuiltFrom, VidraResources: prev.VidraResources, VidraResourceCount: prev.VidraResourceCount,
	}}
	existing := d.resourcesOf(it)
	for _, vr := range existing {
		d.keep[vr.Name] = true
	}
	// Content delivered at once before has no stored copy yet: its holders give one.
	if ra.status.StableChecksum != "" && ra.status.StableDigest == "" {
		ra.status.StableDigest = d.storeHeld(ctx, existing, ra.status.StableChecksum)
		if ra.status.StableDigest == "" {
			ra.status.StableChecksum = ""
		}
	}
	fail := func(msg string, err error) *rolloutBundle {
		ra.status.Message = msg
		d.problem(it, msg, err)
		ra.included = ra.status.Digest != "" // the newest content known before still rolls out
		return ra
	}
	if msg, generating := d.notReady(it); msg != "" {
		if !generating {
			return fail(msg, nil)
		}
		ra.status.Message = msg
		ra.included = ra.status.Digest != ""
		return ra
	}
	if it.Checksum == prev.Checksum && prev.Digest != "" {
		ra.status.BuiltFrom = it.BuiltFrom
		ra.included = true
		return ra
	}
	b, err := d.content(ctx, it, existing, true)
	if err != nil {
		return fail(err.Error(), err)
	}
	digest := ""
	if b.ref != nil {
		digest = b.ref.Digest
	} else if digest, err = d.cfg.Content.Put(ctx, []byte(b.manifest)); err != nil {
		return fail(fmt.Sprintf("store content: %v", err), err)
	}
	ra.status.Checksum, ra.status.Digest, ra.status.BuiltFrom, ra.status.Message = it.Checksum, digest, it.BuiltFrom, ""
	ra.included = true
	return ra
}

// place writes one item's VidraResource on one cluster with the content digest
// names: inline when small enough, else by reference; pending is what waits for it.
func (d *Delivery) place(ctx context.Context, p placement, checksum, digest, revision, now string, pending *vidrav1alpha1.PendingContent) error {
	data, err := d.cfg.Content.Get(ctx, digest)
	if err != nil {
		return fmt.Errorf("%s %s for %s: content %s: %w", d.sync.Noun, p.bundle.item.ID, p.cluster, digest, err)
	}
	if cur := d.owned[p.name]; cur != nil {
		// A rollback the cache does not show yet must not be overwritten.
		fresh := &vidrav1alpha1.VidraResource{}
		if err := d.cfg.HubReader.Get(ctx, client.ObjectKeyFromObject(cur), fresh); err != nil {
			return fmt.Errorf("read VidraResource %s: %w", cur.Name, err)
		}
		if fresh.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
			return nil
		}
	}
	vr := d.resource(p.bundle.item, p.target)
	vr.Annotations[vidrav1alpha1.BundleChecksumAnnotation] = checksum
	vr.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation] = now
	if revision != "" {
		vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = revision
	}
	if len(data) <= d.cfg.InlineLimit && !content.Sealed(digest, data) {
		vr.Spec.Manifest = string(data)
	} else {
		vr.Spec.Content = &vidrav1alpha1.ContentReference{Digest: digest}
	}
	vr.Spec.Preview = pending
	d.keep[vr.Name] = true
	return d.write(ctx, vr)
}

// setPending sets what waits for a VidraResource whose content stays as it is.
func (d *Delivery) setPending(ctx context.Context, p placement, cur *vidrav1alpha1.VidraResource, pending *vidrav1alpha1.PendingContent) error {
	vr := d.resource(p.bundle.item, p.target)
	vr.Annotations[vidrav1alpha1.BundleChecksumAnnotation] = vidrav1alpha1.BundleAnnotation(cur.Annotations, vidrav1alpha1.BundleChecksumAnnotation)
	vr.Spec.Manifest, vr.Spec.Content = cur.Spec.Manifest, cur.Spec.Content
	vr.Spec.Preview = pending
	return d.write(ctx, vr)
}

// carryOver keeps every item's status and VidraResources as they were.
func (d *Delivery) carryOver(items []Item, previous map[string]vidrav1alpha1.BundleStatus) []vidrav1alpha1.BundleStatus {
	out := make([]vidrav1alpha1.BundleStatus, 0, len(items))
	for _, it := range items {
		prev := previous[it.ID]
		prev.ID = it.ID
		out = append(out, prev)
	}
	d.keepAll(items)
	return out
}
