// Package fanout delivers the bundles a sync lists as VidraResources on the hub: one per
// item and destination cluster, made from the sync's template and controlled by it,
// written at once or wave by wave as the rollout planner (package rollout) decides. It
// knows no source: a sync's kind (package syncs) lists the items and brings the Source
// that fetches an item's content; the rest is the same for every kind.
package fanout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fanout/rollout"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
	"github.com/vidra-operator/vidra/internal/runtime/events"
)

// Config is what every delivery of a sync kind shares.
type Config struct {
	// Hub reads VidraResources and VidraClusters from the cache and writes VidraResources.
	Hub client.Client
	// HubReader reads VidraResources from the API server, where a cached one may be stale.
	HubReader client.Reader
	// Content stores contents larger than InlineLimit, and every revision of a
	// progressive rollout. Nil: every content is inline, and rollouts are refused.
	Content *content.Store
	// InlineLimit is the largest content a VidraResource holds inline.
	InlineLimit int
	// Events records Events on the sync.
	Events events.Recorder
	// Transient says whether an error may pass with a retry, to back off on.
	Transient func(error) bool
	// ObserveWave counts a wave that ended, by result (nil: not counted).
	ObserveWave func(result string)
	// Now is the clock.
	Now func() time.Time
	// Written remembers what was written, for the kind's controller to tell its own
	// writes from others' (nil: nothing is remembered).
	Written *Written
}

// Sync is the sync a delivery is for.
type Sync struct {
	// Object is the sync: it controls its VidraResources and has the Events; its kind,
	// rollout spec and status as last written, and its resume request are read from it.
	Object vidrav1alpha1.Sync
	// SourceName names where its content comes from, for people ("Infrahub", "GitSync
	// web's source").
	SourceName string
	// Noun names one item, for people ("artifact", "bundle").
	Noun string
	// Destination and Template are its spec's.
	Destination Destination
	Template    *vidrav1alpha1.VidraResourceTemplate
}

// Destination is where a sync's bundles go: the cluster its Destination names (a cluster,
// a server URL, or the hub), every cluster ClusterSelector matches, or, with ByItem, the
// cluster each item's Target names.
type Destination struct {
	vidrav1alpha1.Destination
	ClusterSelector *metav1.LabelSelector
	// ByItem: each item goes to the cluster its Target names (an InfrahubSync's
	// clusterFromTarget).
	ByItem bool
}

// Item is one bundle a sync lists: an Infrahub artifact, a revision of a Git repository, a
// chart rendered for one cluster.
type Item struct {
	// ID names it across revisions (an Infrahub node ID, a sync's kind).
	ID string
	// Name, Target and Definition say what it is, for people: with Destination.ByItem,
	// Target names the cluster it goes to.
	Name, Target, Definition string
	// Revision is the source's revision it comes from, when the source names one (a Git
	// commit, an OCI tag and digest, a chart version).
	Revision string
	// Checksum is the MD5 of its content, as its source lists it.
	Checksum string
	// Digest names its content in the content store, when the source stored it there.
	Digest string
	// BuiltFrom identifies what a source that builds content per cluster built it from;
	// the status keeps it beside the checksum.
	BuiltFrom string
	// Variables, when set, says for people what it was built with: its VidraResource's
	// BundleVariablesAnnotation.
	Variables string
	// Destination, when set, is the only target the item goes to: a source that builds
	// content for each cluster lists one item per target.
	Destination *Target
	// ResourceID, when set, names the item's VidraResources in ID's place: a sync that
	// begins building its one bundle for each cluster (ID "<kind>/<target>") keeps the
	// VidraResources it had (ID "<kind>"), updated where they are, never replaced.
	ResourceID string
	// Unready, when set, says why its content as listed is not delivered; Generating
	// says the source is still making it, which is no error and is looked at soon, and
	// State is what the source calls that state.
	Unready    string
	Generating bool
	State      string
}

// Source fetches an item's content: what differs from one sync kind to another.
type Source interface {
	Fetch(ctx context.Context, item Item) ([]byte, error)
}

// Delivery is the delivery of one sync's items in one reconcile, and what became of it.
type Delivery struct {
	cfg    Config
	sync   Sync
	source Source
	owned  map[string]*vidrav1alpha1.VidraResource
	// byItem are the owned VidraResources by the item they deliver, in name order: a
	// sync of a thousand clusters looks up each of its thousand items' VidraResources.
	byItem map[string][]*vidrav1alpha1.VidraResource

	// keep are the owned VidraResources to keep: delivered now, or left as they were
	// because their item could not be delivered.
	keep map[string]bool
	// problems say which items could not be delivered and why; transient is the first
	// of their errors that may pass with a retry.
	problems  []string
	transient error
	// pending are items the source is still generating.
	pending []string
	// stored are the MD5 checksums of stored contents, by digest ("" when unreadable).
	stored map[string]string
	// revision is the sync revision a sync that delivers at once writes.
	revision string
	// stalled says why a progressive rollout cannot go on as the sync is written.
	stalled string
	// requeue is how soon a progressive rollout needs another look (0: at the interval).
	requeue time.Duration
	// contentHash, when set, identifies what the sync delivers instead of its items'
	// checksums (see SetContentHash).
	contentHash string
	// itemEvents are the Events of delivered items, bounded (see events.go).
	itemEvents itemEvents
	// written are the VidraResources this delivery wrote, by name, with the cluster
	// each goes to: their status still describes what they were. Writes run
	// concurrently, hence the lock.
	writtenMu sync.Mutex
	written   map[string]string
}

// SetContentHash says what the sync delivers when its items' checksums say more than
// that: a source that builds content for each cluster lists an item per cluster, and a
// cluster joining, or its APIs changing, is no new revision of the sync: the sync's
// revision, and a rollout's, change only with hash.
func (d *Delivery) SetContentHash(hash string) { d.contentHash = hash }

// hashOf identifies the content the items' checksums make.
func (d *Delivery) hashOf(checksums map[string]string) string {
	if d.contentHash != "" {
		return d.contentHash
	}
	return rollout.ContentHash(checksums)
}

// New starts a delivery for sync, finding the VidraResources it made before.
func New(ctx context.Context, cfg Config, sync Sync, source Source) (*Delivery, error) {
	d := &Delivery{cfg: cfg, sync: sync, source: source, keep: map[string]bool{}, stored: map[string]string{}, written: map[string]string{}}
	var err error
	if d.owned, err = d.ownedResources(ctx); err != nil {
		return nil, err
	}
	d.byItem = byItem(d.owned)
	return d, nil
}

// Owned is how many VidraResources the sync made before.
func (d *Delivery) Owned() int { return len(d.owned) }

// Kept is how many VidraResources the sync keeps.
func (d *Delivery) Kept() int { return len(d.keep) }

// Problems say which items could not be delivered and why.
func (d *Delivery) Problems() []string { return d.problems }

// Transient is the first error of the problems that may pass with a retry (nil: none).
func (d *Delivery) Transient() error { return d.transient }

// Pending are the items the source is still generating.
func (d *Delivery) Pending() []string { return d.pending }

// Stalled says why a progressive rollout cannot go on as the sync is written ("": it can).
func (d *Delivery) Stalled() string { return d.stalled }

// Requeue is how soon a progressive rollout needs another look (0: at the interval).
func (d *Delivery) Requeue() time.Duration { return d.requeue }

// problem records why item it could not be delivered, and the first error that may pass
// with a retry.
func (d *Delivery) problem(it Item, msg string, err error) {
	d.problems = append(d.problems, fmt.Sprintf("%s %s for %s: %s", d.sync.Noun, it.ID, it.Target, msg))
	d.retry(err)
}

// retry keeps err, when it may pass with a retry and is the first such, to back off on.
func (d *Delivery) retry(err error) {
	if err != nil && d.transient == nil && d.cfg.Transient != nil && d.cfg.Transient(err) {
		d.transient = err
	}
}

// notReady says why item it is not delivered as listed ("" when it is); generating: the
// source is still at it, which is no error and is looked at soon.
func (d *Delivery) notReady(it Item) (msg string, generating bool) {
	if it.Generating {
		d.pending = append(d.pending, fmt.Sprintf("%s %s for %s (%s)", d.sync.Noun, it.ID, it.Target, it.State))
	}
	return it.Unready, it.Generating
}

// resourcesOf are the owned VidraResources that deliver item it, in name order: those
// that say they deliver it, and those of the same name that delivered the item under
// the ID its sync gave it before (see Item.ResourceID): "<kind>" for one built for
// each cluster, and "<kind>/<target>" for one no longer built so.
func (d *Delivery) resourcesOf(it Item) []*vidrav1alpha1.VidraResource {
	vrs := d.byItem[it.ID]
	if it.ResourceID != "" && it.Destination != nil {
		vr := d.owned[it.resourceName(d.sync.Object.GetName(), *it.Destination)]
		if vr != nil && !slices.Contains(vrs, vr) {
			vrs = append(slices.Clone(vrs), vr)
		}
		return vrs
	}
	if built := d.byItem[perTarget+it.ID]; len(built) > 0 {
		vrs = append(slices.Clone(vrs), built...)
		slices.SortFunc(vrs, func(a, b *vidrav1alpha1.VidraResource) int { return strings.Compare(a.Name, b.Name) })
	}
	return vrs
}

// perTarget begins the key under which byItem also indexes the VidraResources of items
// "<kind>/<target>" by "<kind>", which no item's ID begins with.
const perTarget = "\x00"

// byItem indexes owned by the item each VidraResource delivers, each item's in name order.
func byItem(owned map[string]*vidrav1alpha1.VidraResource) map[string][]*vidrav1alpha1.VidraResource {
	index := map[string][]*vidrav1alpha1.VidraResource{}
	for _, vr := range owned {
		id := vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleIDAnnotation)
		index[id] = append(index[id], vr)
		if family, _, found := strings.Cut(id, "/"); found {
			index[perTarget+family] = append(index[perTarget+family], vr)
		}
	}
	for _, vrs := range index {
		slices.SortFunc(vrs, func(a, b *vidrav1alpha1.VidraResource) int { return strings.Compare(a.Name, b.Name) })
	}
	return index
}

// keepAll keeps the VidraResources of every item as they are.
func (d *Delivery) keepAll(items []Item) {
	for _, it := range items {
		for _, vr := range d.resourcesOf(it) {
			d.keep[vr.Name] = true
		}
	}
}

// Deliver delivers the items to their targets, at once or wave by wave as the sync's
// rollout says, and returns their statuses and where the rollout stands (nil: as it was
// written). The sync's RolledOut condition follows a progressive rollout, and is removed
// for one delivered at once. The statuses are bounded (see bounded).
func (d *Delivery) Deliver(ctx context.Context, items []Item, targets []Target, previous map[string]vidrav1alpha1.BundleStatus) ([]vidrav1alpha1.BundleStatus, *vidrav1alpha1.RolloutStatus) {
	if Progressive(d.sync.Object.RolloutSpec()) {
		statuses, st := d.Progressive(ctx, items, targets, previous)
		if st != nil {
			MarkRolledOut(d.sync.Object, *st)
		}
		return bounded(statuses), st
	}
	statuses, st := d.AtOnce(ctx, items, targets, previous)
	conditions.Remove(d.sync.Object, vidrav1alpha1.ConditionRolledOut)
	return bounded(statuses), &st
}
