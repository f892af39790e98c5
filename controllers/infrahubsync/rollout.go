package infrahubsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/conditions"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/infrahub"
)

// progressive says whether the sync rolls new content out wave by wave.
func progressive(ihs *vidrav1alpha1.InfrahubSync) bool {
	return ihs.Spec.Rollout != nil && ihs.Spec.Rollout.Strategy == vidrav1alpha1.RolloutProgressive
}

// contentHash identifies a revision: the artifacts and their checksums.
func contentHash(checksums map[string]string) string {
	ids := make([]string, 0, len(checksums))
	for id := range checksums {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := sha256.New()
	for _, id := range ids {
		fmt.Fprintf(h, "%s=%s\n", id, checksums[id])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// revisionOf numbers the listed content for a sync that delivers at once: the revision
// grows when an artifact's checksum changes, or an artifact comes or goes.
func revisionOf(ihs *vidrav1alpha1.InfrahubSync, artifacts []infrahub.Artifact) vidrav1alpha1.RolloutStatus {
	delivered := map[string]string{}
	for _, a := range ihs.Status.Artifacts {
		delivered[a.ID] = a.Checksum
	}
	checksums := map[string]string{}
	for _, a := range artifacts {
		switch {
		case a.Status == infrahub.StatusReady:
			checksums[a.ID] = a.Checksum
		case delivered[a.ID] != "":
			checksums[a.ID] = delivered[a.ID] // still generating: what it delivers stays
		}
	}
	st := vidrav1alpha1.RolloutStatus{}
	if ihs.Status.Rollout != nil {
		st = *ihs.Status.Rollout
	}
	if hash := contentHash(checksums); hash != st.ContentHash {
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

// placement is one artifact's VidraResource on one cluster.
type placement struct {
	artifact *rolloutArtifact
	target   target
	cluster  string
	name     string
}

// rolloutArtifact is one listed artifact of a progressive sync, with its newest and its
// stable content.
type rolloutArtifact struct {
	a      infrahub.Artifact
	status vidrav1alpha1.ArtifactStatus
	// included: its newest content is known and stored, so it takes part in the rollout.
	included bool
}

// rollout delivers the artifacts of a progressive sync: their newest content is kept in
// the content store, and each cluster gets it when its wave is reached and the budget
// allows; the others keep (and repair) what they have.
func (d *delivery) rollout(ctx context.Context, artifacts []infrahub.Artifact, dests []target, previous map[string]vidrav1alpha1.ArtifactStatus) []vidrav1alpha1.ArtifactStatus {
	ihs := d.ihs
	if d.r.Content == nil {
		d.stalled = "a progressive rollout keeps each revision in the content store, and this operator has none (--content-namespace)"
		return carryOver(artifacts, previous, d)
	}
	clusterLabels, err := d.r.clusterLabels(ctx)
	if err != nil {
		d.problems = append(d.problems, err.Error())
		d.transient = err
		return carryOver(artifacts, previous, d)
	}

	// The content of each artifact: the newest, stored; and the stable one.
	var arts []*rolloutArtifact
	var places []placement
	for _, a := range artifacts {
		ra := d.prepare(ctx, a, previous[a.ID])
		arts = append(arts, ra)
		if !ra.included {
			continue
		}
		targets, msg := d.targetsOf(a, dests)
		if msg != "" {
			ra.included = false
			ra.status.Message = msg
			d.problem(a, msg, nil)
			continue
		}
		for _, t := range targets {
			places = append(places, placement{artifact: ra, target: t, cluster: t.segment, name: resourceName(ihs.Name, t.segment, t.key, a.ID)})
		}
	}

	// What the API shows of each cluster.
	views := map[string]*clusterView{}
	var order []string
	checksums := map[string]string{}
	hasStable := false
	for _, ra := range arts {
		if ra.included {
			checksums[ra.a.ID] = ra.status.Checksum
			hasStable = hasStable || ra.status.StableDigest != ""
		}
	}
	for _, p := range places {
		v := views[p.cluster]
		if v == nil {
			v = &clusterView{name: p.cluster, labels: clusterLabels[p.cluster], present: true, atTarget: true, healthy: true}
			views[p.cluster] = v
			order = append(order, p.cluster)
		}
		cur := d.owned[p.name]
		switch {
		case cur == nil:
			v.present, v.atTarget, v.healthy = false, false, false
			continue
		case cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "":
			v.pinned = true
		}
		ok, why := healthy(cur)
		v.unavailable = v.unavailable || !ok
		if !d.holds(ctx, cur, p.artifact.status.Checksum) {
			v.atTarget, v.healthy = false, false
			continue
		}
		if t := updatedAt(cur); t.After(v.updatedAt) {
			v.updatedAt = t
		}
		if !ok {
			v.healthy = false
			if v.unhealthy == "" {
				v.unhealthy = cur.Name + ": " + why
			}
		}
	}
	in := rolloutInput{
		spec: *ihs.Spec.Rollout, hash: contentHash(checksums), hasStable: hasStable,
		resume: ihs.Annotations[vidrav1alpha1.ResumeRequestedAtAnnotation], now: d.r.now(),
	}
	if ihs.Status.Rollout != nil {
		in.last = *ihs.Status.Rollout
	}
	for _, name := range order {
		in.clusters = append(in.clusters, *views[name])
	}
	plan, err := planRollout(in)
	if err != nil {
		d.stalled = "rollout: " + err.Error()
		return carryOver(artifacts, previous, d)
	}

	// Move the clusters as planned.
	now := d.r.now().UTC().Format(time.RFC3339)
	written := map[*rolloutArtifact][]string{}
	pinnedBy := map[*rolloutArtifact][]string{}
	// lost: the newest content is gone from the store; it is fetched again next time.
	lost := map[*rolloutArtifact]bool{}
	for _, p := range places {
		cur := d.owned[p.name]
		if cur != nil {
			d.keep[p.name] = true
			written[p.artifact] = append(written[p.artifact], p.name)
		}
		if cur != nil && cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
			if !d.holds(ctx, cur, p.artifact.status.Checksum) {
				pinnedBy[p.artifact] = append(pinnedBy[p.artifact], fmt.Sprintf("%s (revision %s)", cur.Name, cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]))
			}
			continue
		}
		st := p.artifact.status
		revision := strconv.FormatInt(plan.status.Revision, 10)
		// Where the cluster's content goes now.
		var checksum, digest, contentRevision string
		switch plan.moves[p.cluster] {
		case toNewest:
			checksum, digest, contentRevision = st.Checksum, st.Digest, revision
		case toStable:
			checksum, digest = st.StableChecksum, st.StableDigest
			if plan.status.StableRevision > 0 {
				contentRevision = strconv.FormatInt(plan.status.StableRevision, 10)
			}
			if digest == "" && cur != nil {
				// The artifact came with the failed revision: rolled back, it goes.
				delete(d.keep, p.name)
				continue
			}
		}
		if digest != "" && cur != nil && d.holds(ctx, cur, checksum) {
			digest = "" // it has it already
		}
		if digest == "" && cur == nil {
			continue
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
				lost[p.artifact] = true
			}
			continue
		}
		if cur == nil {
			written[p.artifact] = append(written[p.artifact], p.name)
		}
	}

	// Status: the rollout, and the stable content once a revision completed.
	st := plan.status
	st.Message = conditions.Bounded(st.Message) // it names clusters and their reasons
	ihs.Status.Rollout = &st
	out := make([]vidrav1alpha1.ArtifactStatus, 0, len(arts))
	for _, ra := range arts {
		s := ra.status
		if names, ok := written[ra]; ok {
			slices.Sort(names)
			s.VidraResources = slices.Compact(names)
		}
		if plan.completed && ra.included {
			s.StableChecksum, s.StableDigest = s.Checksum, s.Digest
		}
		if lost[ra] {
			s.Checksum, s.Digest = "", ""
		}
		if pinned := pinnedBy[ra]; len(pinned) > 0 {
			s.Message = pinnedMessage(ihs.Name, s.Checksum, pinned)
		}
		out = append(out, s)
	}
	for _, e := range plan.events {
		d.r.event(ihs, nil, e.eventType, e.reason, e.note)
	}
	for _, w := range plan.waves {
		d.r.Metrics.observeWave(w)
	}
	markRolledOut(ihs, st)
	d.requeue = plan.requeue
	return out
}

// prepare finds an artifact's newest content (downloading it only when no VidraResource
// of the sync holds it) and stores it, and makes sure its stable content is stored.
func (d *delivery) prepare(ctx context.Context, a infrahub.Artifact, prev vidrav1alpha1.ArtifactStatus) *rolloutArtifact {
	ra := &rolloutArtifact{a: a, status: vidrav1alpha1.ArtifactStatus{
		ID: a.ID, Name: a.Name, Target: a.Target.Label, Definition: a.Definition,
		Checksum: prev.Checksum, Digest: prev.Digest, StableChecksum: prev.StableChecksum, StableDigest: prev.StableDigest,
		VidraResources: prev.VidraResources,
	}}
	existing := d.resourcesOf(a.ID)
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
	fail := func(msg string, err error) *rolloutArtifact {
		ra.status.Message = msg
		d.problem(a, msg, err)
		ra.included = ra.status.Digest != "" // the newest content known before still rolls out
		return ra
	}
	if msg, generating := d.notReady(a); msg != "" {
		if !generating {
			return fail(msg, nil)
		}
		ra.status.Message = msg
		ra.included = ra.status.Digest != ""
		return ra
	}
	if a.Checksum == prev.Checksum && prev.Digest != "" {
		ra.included = true
		return ra
	}
	b, err := d.content(ctx, a, existing, true)
	if err != nil {
		return fail(err.Error(), err)
	}
	digest := ""
	if b.ref != nil {
		digest = b.ref.Digest
	} else if digest, err = d.r.Content.Put(ctx, []byte(b.manifest)); err != nil {
		return fail(fmt.Sprintf("store content: %v", err), err)
	}
	ra.status.Checksum, ra.status.Digest, ra.status.Message = a.Checksum, digest, ""
	ra.included = true
	return ra
}

// storeHeld stores the content with checksum that one of the VidraResources holds and
// returns its digest ("" when none holds it).
func (d *delivery) storeHeld(ctx context.Context, vrs []*vidrav1alpha1.VidraResource, checksum string) string {
	for _, vr := range vrs {
		if !d.holds(ctx, vr, checksum) {
			continue
		}
		if vr.Spec.Content != nil {
			return vr.Spec.Content.Digest
		}
		digest, err := d.r.Content.Put(ctx, []byte(vr.Spec.Manifest))
		if err == nil {
			return digest
		}
	}
	return ""
}

// place writes one artifact's VidraResource on one cluster with the content digest
// names: inline when small enough, else by reference; pending is what waits for it.
func (d *delivery) place(ctx context.Context, p placement, checksum, digest, revision, now string, pending *vidrav1alpha1.PendingContent) error {
	data, err := d.r.Content.Get(ctx, digest)
	if err != nil {
		return fmt.Errorf("artifact %s for %s: content %s: %w", p.artifact.a.ID, p.cluster, digest, err)
	}
	if cur := d.owned[p.name]; cur != nil {
		// A rollback the cache does not show yet must not be overwritten.
		fresh := &vidrav1alpha1.VidraResource{}
		if err := d.r.HubReader.Get(ctx, client.ObjectKeyFromObject(cur), fresh); err != nil {
			return fmt.Errorf("read VidraResource %s: %w", cur.Name, err)
		}
		if fresh.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
			return nil
		}
	}
	vr := d.resource(p.artifact.a, p.target)
	vr.Annotations[vidrav1alpha1.ArtifactChecksumAnnotation] = checksum
	vr.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation] = now
	if revision != "" {
		vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = revision
	}
	if len(data) <= d.r.inlineLimit() {
		vr.Spec.Manifest = string(data)
	} else {
		vr.Spec.Content = &vidrav1alpha1.ContentReference{Digest: digest}
	}
	vr.Spec.Preview = pending
	d.keep[vr.Name] = true
	return d.write(ctx, vr)
}

// setPending sets what waits for a VidraResource whose content stays as it is.
func (d *delivery) setPending(ctx context.Context, p placement, cur *vidrav1alpha1.VidraResource, pending *vidrav1alpha1.PendingContent) error {
	vr := d.resource(p.artifact.a, p.target)
	vr.Annotations[vidrav1alpha1.ArtifactChecksumAnnotation] = cur.Annotations[vidrav1alpha1.ArtifactChecksumAnnotation]
	vr.Spec.Manifest, vr.Spec.Content = cur.Spec.Manifest, cur.Spec.Content
	vr.Spec.Preview = pending
	return d.write(ctx, vr)
}

// waiting is the newest content of an artifact, as what waits for a cluster: inline when
// small enough, else by reference (nil when unreadable: there is no preview then).
func (d *delivery) waiting(ctx context.Context, st vidrav1alpha1.ArtifactStatus, revision string) *vidrav1alpha1.PendingContent {
	if st.Digest == "" {
		return nil
	}
	data, err := d.r.Content.Get(ctx, st.Digest)
	if err != nil {
		return nil
	}
	if len(data) <= d.r.inlineLimit() {
		return &vidrav1alpha1.PendingContent{Manifest: string(data), Revision: revision}
	}
	return &vidrav1alpha1.PendingContent{Content: &vidrav1alpha1.ContentReference{Digest: st.Digest}, Revision: revision}
}

// carryOver keeps every artifact's status and VidraResources as they were.
func carryOver(artifacts []infrahub.Artifact, previous map[string]vidrav1alpha1.ArtifactStatus, d *delivery) []vidrav1alpha1.ArtifactStatus {
	out := make([]vidrav1alpha1.ArtifactStatus, 0, len(artifacts))
	for _, a := range artifacts {
		prev := previous[a.ID]
		prev.ID = a.ID
		out = append(out, prev)
		for _, vr := range d.resourcesOf(a.ID) {
			d.keep[vr.Name] = true
		}
	}
	return out
}

// updatedAt is when a rollout moved the VidraResource to its content: the annotation, or
// its creation.
func updatedAt(vr *vidrav1alpha1.VidraResource) time.Time {
	if t, err := time.Parse(time.RFC3339, vr.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation]); err == nil {
		return t
	}
	return vr.CreationTimestamp.Time
}

// healthy says whether a VidraResource is healthy for the spec it has now: Ready for its
// generation and, when it delivers VirtualMachines, their rollout Completed.
func healthy(vr *vidrav1alpha1.VidraResource) (bool, string) {
	if vr.Status.ObservedGeneration != vr.Generation {
		return false, "not yet reconciled"
	}
	ready := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionReady)
	switch {
	case ready == nil || ready.ObservedGeneration != vr.Generation:
		return false, "not yet reconciled"
	case ready.Status != metav1.ConditionTrue:
		return false, ready.Reason + ": " + ready.Message
	}
	if slices.ContainsFunc(vr.Status.ManagedResources, func(m vidrav1alpha1.ManagedResource) bool {
		return m.Kind == "VirtualMachine" && strings.HasPrefix(m.APIVersion, "kubevirt.io/")
	}) {
		vm := meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionVMRollout)
		switch {
		case vm == nil || vm.ObservedGeneration != vr.Generation:
			return false, "VM rollout not yet started"
		case vm.Status != metav1.ConditionTrue:
			return false, "VM rollout: " + vm.Message
		}
	}
	return true, ""
}

// clusterLabels are the labels of every enrolled cluster, by name.
func (r *Reconciler) clusterLabels(ctx context.Context) (map[string]map[string]string, error) {
	var clusters vidrav1alpha1.VidraClusterList
	if err := r.Hub.List(ctx, &clusters); err != nil {
		return nil, fmt.Errorf("list VidraClusters: %w", err)
	}
	out := make(map[string]map[string]string, len(clusters.Items))
	for _, vc := range clusters.Items {
		out[vc.Name] = vc.Labels
	}
	return out, nil
}

// markRolledOut sets the RolledOut condition from the rollout's phase.
func markRolledOut(ihs *vidrav1alpha1.InfrahubSync, st vidrav1alpha1.RolloutStatus) {
	status := metav1.ConditionFalse
	if st.Phase == vidrav1alpha1.RolloutCompleted {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&ihs.Status.Conditions, metav1.Condition{
		Type: vidrav1alpha1.ConditionRolledOut, Status: status, Reason: string(st.Phase), Message: conditions.Bounded(st.Message), ObservedGeneration: ihs.Generation,
	})
}
