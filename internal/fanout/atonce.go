package fanout

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// AtOnce delivers every item to every one of its targets now, and returns their statuses
// and the revision of the content they make.
func (d *Delivery) AtOnce(ctx context.Context, items []Item, targets []Target, previous map[string]vidrav1alpha1.ArtifactStatus) ([]vidrav1alpha1.ArtifactStatus, vidrav1alpha1.RolloutStatus) {
	st := d.revisionOf(items, previous)
	d.revision = strconv.FormatInt(st.Revision, 10)
	var statuses []vidrav1alpha1.ArtifactStatus
	for _, it := range items {
		statuses = append(statuses, d.deliver(ctx, it, targets, previous[it.ID]))
	}
	d.recordFoldedEvents()
	if len(d.problems) > 0 {
		// The phase stays Completed: a switch to Progressive must not inherit a failure.
		st.Message = fmt.Sprintf("revision %d: not delivered everywhere: %s", st.Revision, d.problems[0])
	}
	return statuses, st
}

// deliver writes item it's VidraResources, one per target, and returns its status.
// Whatever goes wrong, the VidraResources it had are kept as they were.
func (d *Delivery) deliver(ctx context.Context, it Item, targets []Target, prev vidrav1alpha1.ArtifactStatus) vidrav1alpha1.ArtifactStatus {
	st := vidrav1alpha1.ArtifactStatus{
		ID: it.ID, Name: it.Name, Target: it.Target, Definition: it.Definition,
		Checksum: prev.Checksum, Digest: prev.Digest, StableChecksum: prev.StableChecksum, StableDigest: prev.StableDigest,
		BuiltFrom: prev.BuiltFrom, VidraResources: prev.VidraResources, VidraResourceCount: prev.VidraResourceCount,
	}
	existing := d.resourcesOf(it.ID)
	keepExisting := func() {
		for _, vr := range existing {
			d.keep[vr.Name] = true
		}
	}
	fail := func(msg string, err error) vidrav1alpha1.ArtifactStatus {
		keepExisting()
		st.Message = msg
		d.problem(it, msg, err)
		return st
	}

	if msg, generating := d.notReady(it); msg != "" {
		if !generating {
			return fail(msg, nil)
		}
		keepExisting()
		st.Message = msg
		return st
	}
	targets, msg := d.targetsOf(it, targets)
	if msg != "" {
		return fail(msg, nil)
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
		return fail(err.Error(), err)
	}

	// Write them.
	names, pinned, err := d.writeAll(ctx, it, desired, body)
	st.VidraResources, st.VidraResourceCount = names, 0 // bounded counts them
	if err != nil {
		return fail(err.Error(), err)
	}
	// A stored content's digest is kept, so that a source that builds content per
	// cluster finds it again without building it (Infrahub's content has none).
	st.Checksum, st.StableChecksum, st.BuiltFrom = it.Checksum, it.Checksum, it.BuiltFrom
	st.Digest, st.StableDigest = it.Digest, it.Digest
	if len(pinned) > 0 {
		st.Message = d.pinnedMessage(it.Checksum, pinned)
	}
	d.eventDelivered(it, prev, desired, names)
	return st
}

// writeAll writes item it's desired VidraResources with its content (body; nil: the
// content they hold), but those a rollback pins. It returns their names, and the pinned
// ones that do not hold the item's content.
func (d *Delivery) writeAll(ctx context.Context, it Item, desired []*vidrav1alpha1.VidraResource, body *body) (names, pinned []string, err error) {
	var writeErrs []error
	for _, vr := range desired {
		names = append(names, vr.Name)
		d.keep[vr.Name] = true
		if cur := d.owned[vr.Name]; cur != nil && cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
			// A person rolled it back: it keeps its content until the rollout is resumed.
			if !d.holds(ctx, cur, it.Checksum) {
				pinned = append(pinned, fmt.Sprintf("%s (revision %s)", vr.Name, cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]))
			}
			continue
		}
		if body != nil {
			vr.Spec.Manifest, vr.Spec.Content = body.manifest, body.ref
		}
		if d.revision != "" {
			vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = d.revision
		}
		if err := d.write(ctx, vr); err != nil {
			writeErrs = append(writeErrs, err)
		}
	}
	return names, pinned, errors.Join(writeErrs...)
}

// revisionOf numbers the listed content for a sync that delivers at once: the revision
// grows when an item's checksum changes, or an item comes or goes.
func (d *Delivery) revisionOf(items []Item, previous map[string]vidrav1alpha1.ArtifactStatus) vidrav1alpha1.RolloutStatus {
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
