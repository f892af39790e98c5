package sourcesync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/manifest"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/fanout/rollout"
)

// Renderer is a source whose bundle is built for each destination as that cluster is: a
// Helm chart, rendered with the cluster's version, APIs and values.
type Renderer interface {
	Resolver
	// Namespace is where obj's objects that name no namespace go on every cluster.
	Namespace(obj Object) string
	// Prepare says what obj's bundle of rev for one destination is built from, without
	// building it; its error names the cluster.
	Prepare(ctx context.Context, obj Object, rev Revision, target fanout.Target) (Build, error)
}

// Build is how one destination's bundle is built.
type Build struct {
	// Key identifies the inputs: equal keys build equal bundles, and a cluster whose
	// bundle was built from the key is not built for again.
	Key string
	// Content identifies what the sync delivers, whatever the cluster: equal for every
	// destination of one revision of the source and of the sync's spec (the chart
	// version, the release and the values before the cluster's are put in).
	Content string
	// Scope is who may share a bundle built in this process beside the key: the
	// credentials it was fetched with, so that no sync gets through another's rendering
	// a chart its own credentials do not open.
	Scope string
	// Run builds the bundle; upgrade says whether the cluster had an earlier one, which
	// matters only when Upgrades says so (a chart may tell an install from an upgrade).
	Run      func(ctx context.Context, upgrade bool) ([]byte, error)
	Upgrades bool
	// Sealed, when set, is the address the bundle is stored under (content.PutSealed):
	// it holds what was decrypted, and no digest of it may be shown.
	Sealed string
	// Variables says for people what it was built with (fanout.Item.Variables).
	Variables string
}

// renderings are what was built for each destination: the items to deliver, the
// destinations that got none, with why, and what the sync delivers whatever the cluster.
type renderings struct {
	items    []fanout.Item
	failures []targetFailure
	contents map[string]bool
}

// contentHash identifies what the sync delivers: its content as the builds say it, else
// (nothing built) as the rollout last recorded it, so that a cluster joining, leaving or
// failing is never a new revision.
func (rs renderings) contentHash(obj Object) string {
	if len(rs.contents) == 0 {
		if st := obj.SourceStatus().Rollout; st != nil {
			return st.ContentHash
		}
		return ""
	}
	return rollout.ContentHash(map[string]string{"content": strings.Join(slices.Sorted(maps.Keys(rs.contents)), ",")})
}

type targetFailure struct {
	target string
	err    error
}

// readRendered asks the source which version the sync names. Each destination's bundle
// is built as the fan-out lists the destinations (renderedRead.Items), only from inputs
// not built before. When the source cannot be asked, every destination keeps what it has
// (and a rollout goes on with it); a destination whose bundle cannot be built keeps its
// own, and is named in the sync's condition.
func (k *Kind) readRendered(ctx context.Context, obj Object, r Renderer) (syncs.Read, error) {
	read := &renderedRead{stored: stored{store: k.Content}, kind: k, renderer: r, obj: obj}
	rev, err := r.Resolve(ctx, obj)
	if err != nil {
		return read, err
	}
	k.recordRevision(obj, rev)
	read.rev, read.resolved = rev, true
	return read, nil
}

// renderedRead delivers one bundle to each destination, built for it.
type renderedRead struct {
	stored
	kind     *Kind
	renderer Renderer
	obj      Object
	// rev is the revision the source named, when resolved (else what each destination
	// has is carried).
	rev      Revision
	resolved bool
	out      renderings
}

// Items builds each destination's bundle, or carries what it has while the source cannot
// be asked.
func (rr *renderedRead) Items(ctx context.Context, d *fanout.Delivery, targets []fanout.Target, previous map[string]vidrav1alpha1.BundleStatus) []fanout.Item {
	if rr.resolved {
		rr.out = rr.kind.renderAll(ctx, rr.renderer, rr.obj, rr.rev, targets, previous)
	} else {
		rr.out.items = rr.kind.carried(rr.obj, targets, previous)
	}
	d.SetContentHash(rr.out.contentHash(rr.obj))
	return rr.out.items
}

// Record writes the delivery to the sync's status, and reports the destinations whose
// bundle could not be built, naming each; the others were delivered.
func (rr *renderedRead) Record(bundles []vidrav1alpha1.BundleStatus, rollout *vidrav1alpha1.RolloutStatus, _ map[string]vidrav1alpha1.BundleStatus) (string, error) {
	record(rr.obj, bundles, rollout)
	name := ""
	if src := rr.obj.SourceStatus().Source; src != nil {
		name = src.Revision
	}
	return name, targetsFailure(rr.out.failures)
}

// recordRevision records in status.source the revision the source named.
func (k *Kind) recordRevision(obj Object, rev Revision) {
	status := obj.SourceStatus()
	now := metav1.NewTime(k.now())
	status.LastSyncTime = &now
	if status.Source == nil || status.Source.Key != rev.Key {
		status.Source = &vidrav1alpha1.SourceStatus{FetchedAt: &now}
	}
	status.Source.Revision, status.Source.Key, status.Source.Digest = rev.Name, rev.Key, rev.Digest
}

// renderAll builds each destination's bundle, unless it was built from the same inputs.
func (k *Kind) renderAll(ctx context.Context, r Renderer, obj Object, rev Revision, targets []fanout.Target, previous map[string]vidrav1alpha1.BundleStatus) renderings {
	out := renderings{contents: map[string]bool{}}
	for _, t := range targets {
		it := k.targetItem(obj, rev.Name, t)
		prev := previous[it.ID]
		b, err := r.Prepare(ctx, obj, rev, t)
		if err == nil {
			it.Checksum, it.Digest, err = k.rendered(ctx, b, prev)
		}
		if err != nil {
			// Listed still, so that what it has stays, whatever status says of it.
			out.failures = append(out.failures, targetFailure{target: t.Name(), err: err})
			it.Unready = err.Error()
		} else {
			it.BuiltFrom, it.Variables = b.Key, b.Variables
			out.contents[b.Content] = true
		}
		out.items = append(out.items, it)
	}
	return out
}

// rendered returns the checksum and digest of a destination's bundle: the one built before
// from the same inputs, else built now and stored.
func (k *Kind) rendered(ctx context.Context, b Build, prev vidrav1alpha1.BundleStatus) (checksum, digest string, err error) {
	if prev.BuiltFrom == b.Key && prev.Digest != "" {
		if info, err := k.Content.Stat(ctx, prev.Digest); err == nil {
			return info.MD5, prev.Digest, nil
		}
	}
	// A cluster that had a bundle is upgraded: charts may tell an install from an upgrade.
	upgrade := b.Upgrades && (prev.Checksum != "" || prev.StableChecksum != "")
	memo := fmt.Sprintf("render\x00%s\x00%s\x00%t", b.Key, b.Scope, upgrade)
	if known, ok := k.builds().Get(memo); ok {
		if f, failed := known.(failedBuild); failed {
			if f.until.IsZero() || k.now().Before(f.until) {
				return "", "", f.err
			}
			k.builds().Remove(memo)
		} else if info, err := k.Content.Stat(ctx, known.(string)); err == nil {
			return info.MD5, known.(string), nil
		}
	}
	data, err := b.Run(ctx, upgrade)
	k.Metrics.observeBuild(k.Sync.Kind, err)
	if k.Renderer != nil {
		k.Metrics.observeFetch(k.Sync.Kind, err) // a chart's rendering, as it always was counted
	}
	if err == nil {
		if _, decodeErr := manifest.Decode(data); decodeErr != nil {
			err = &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("what was built is not Kubernetes manifests: %w", decodeErr)}
		}
	}
	if err != nil {
		if f, ok := k.remembered(err); ok {
			k.builds().Add(memo, f)
		}
		return "", "", err
	}
	checksum, digest = content.MD5(data), b.Sealed
	if b.Sealed != "" {
		checksum, err = k.Content.PutSealed(ctx, b.Sealed, data)
	} else {
		digest, err = k.Content.Put(ctx, data)
	}
	if err != nil {
		return "", "", &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: fmt.Errorf("store bundle: %w", err)}
	}
	k.builds().Add(memo, digest)
	return checksum, digest, nil
}

// carried are the bundles the destinations had, delivered as they are while the source
// cannot be asked.
func (k *Kind) carried(obj Object, targets []fanout.Target, previous map[string]vidrav1alpha1.BundleStatus) []fanout.Item {
	var items []fanout.Item
	for _, t := range targets {
		it := k.targetItem(obj, "", t)
		prev, ok := previous[it.ID]
		if !ok && it.ResourceID != "" {
			prev, ok = previous[it.ResourceID] // the one bundle for all it had before a spec.postBuild
		}
		if !ok || prev.Checksum == "" {
			continue
		}
		it.Revision, it.Checksum, it.Digest, it.BuiltFrom = prev.Revision, prev.Checksum, prev.Digest, prev.BuiltFrom
		if it.Revision == "" {
			it.Revision = prev.Target // as earlier versions wrote it
		}
		items = append(items, it)
	}
	return items
}

// targetItem is the item that delivers a sync's bundle to one destination: its ID names
// the kind and the destination, so VidraResources never collide across kinds. A kind
// whose source builds one bundle for all (substituted for each destination only with a
// spec.postBuild) keeps naming its VidraResources as that one bundle's.
func (k *Kind) targetItem(obj Object, revision string, t fanout.Target) fanout.Item {
	it := fanout.Item{
		ID:          strings.ToLower(k.Sync.Kind) + "/" + t.Key(),
		Name:        obj.GetName(),
		Revision:    revision,
		Destination: &t,
	}
	if k.Renderer == nil {
		it.ResourceID = strings.ToLower(k.Sync.Kind)
	}
	return it
}

// targetsFailure is the failure of the destinations whose bundle could not be built,
// naming each (nil when none): it stalls the sync only when every one stalls.
func targetsFailure(failures []targetFailure) error {
	if len(failures) == 0 {
		return nil
	}
	out := &syncs.Failure{Stalled: true}
	msgs := make([]string, 0, len(failures))
	for _, tf := range failures {
		var f *syncs.Failure
		if !errors.As(tf.err, &f) {
			f = &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: tf.err}
		}
		out.Reason = cmp.Or(out.Reason, f.Reason)
		out.Stalled = out.Stalled && f.Stalled
		out.Transient = out.Transient || f.Transient
		msgs = append(msgs, fmt.Sprintf("cluster %s: %v", tf.target, tf.err))
	}
	out.Err = errors.New(strings.Join(msgs, "; ") + "; what was delivered there before stays as it is")
	return out
}

// stored gives the fan-out each item's bundle from the content store, where every source
// sync keeps what it built. Nothing is withheld, and nothing held.
type stored struct {
	store *content.Store
}

func (stored) Withheld(int) (string, string) { return "", "" }
func (stored) Close()                        {}

func (s stored) Fetch(ctx context.Context, it fanout.Item) ([]byte, error) {
	if it.Digest == "" {
		return nil, fmt.Errorf("bundle %s: %w", it.ID, content.ErrUnavailable)
	}
	data, err := s.store.Get(ctx, it.Digest)
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", it.Digest, err)
	}
	return data, nil
}
