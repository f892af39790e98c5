// Package history keeps the delivered revisions of a VidraResource as ControllerRevisions,
// the Kubernetes convention kubectl rollout history follows: one per distinct content,
// numbered in the order they were delivered, in the operator's namespace, owned by the
// VidraResource. A revision holds its manifest compressed, or the digest of content kept
// in the content store.
package history

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/ownership"
)

// Body is a revision's content: a manifest, or the digest of content in the store.
type Body struct {
	Manifest string
	Content  *vidrav1alpha1.ContentReference
}

// Revision is one delivered revision of a VidraResource.
type Revision struct {
	// Name of the ControllerRevision.
	Name string
	// Number orders the revisions: the highest is the one delivered now.
	Number int64
	// Recorded is when the revision was last delivered.
	Recorded time.Time
	// Digest is the sha256 digest of its manifest.
	Digest string
	// Source says where its content came from.
	Source string
	// SyncRevision is the revision of the InfrahubSync's content it delivered, if any.
	SyncRevision string
	// Result is how it ended when a newer revision replaced it; empty for the newest.
	Result string
	// Checksum is the Infrahub checksum of its content, when a sync delivered it.
	Checksum string
	// Body is its content.
	Body Body
}

// History reads and writes the revisions of VidraResources in one namespace.
type History struct {
	// Client writes ControllerRevisions.
	Client client.Client
	// Reader lists them (uncached: a revision is recorded only when content changes).
	Reader client.Reader
	// Namespace holds them: the operator's.
	Namespace string

	// compressors are gzip writers kept between records: each new one allocates
	// hundreds of KiB, more than most manifests it compresses.
	compressors sync.Pool
}

// data is what a ControllerRevision holds.
type data struct {
	// Manifest is the gzip-compressed manifest.
	Manifest []byte `json:"manifest,omitempty"`
	// Content names stored content instead.
	Content *vidrav1alpha1.ContentReference `json:"content,omitempty"`
	// Inventory names the objects the revision applies, recorded before any is applied.
	Inventory []vidrav1alpha1.ManagedResource `json:"inventory,omitempty"`
}

// Name is the name of the ControllerRevision of content digest for a VidraResource.
func Name(vrName, digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	if len(hex) > 10 {
		hex = hex[:10]
	}
	const room = 253 - 11
	if len(vrName) > room {
		vrName = strings.TrimRight(vrName[:room], ".-")
	}
	return vrName + "-" + hex
}

// Entry is what Record is told of the delivery.
type Entry struct {
	// Body and Digest are the content delivered now.
	Body   Body
	Digest string
	// Source says where it came from ("user", or an artifact and its checksum).
	Source string
	// SyncRevision is the revision of the InfrahubSync's content, if any.
	SyncRevision string
	// Checksum is the Infrahub checksum of the content, if a sync delivered it.
	Checksum string
	// PreviousResult is how the revision delivered until now ended, recorded on it.
	PreviousResult string
	// Limit is how many revisions are kept; 0 keeps none.
	Limit int
	// Inventory names the objects the content applies (identity fields only), kept on a
	// new revision so that the revision, written before the apply, records them.
	Inventory []vidrav1alpha1.ManagedResource
	// Delivered is the number of the revision the VidraResource's status says it
	// delivered; the inventories of revisions numbered above it are returned as pending.
	Delivered int64
	// Owned is the inventory the VidraResource's status holds. A pending revision is
	// deleted (by the limit) only once Owned, or the revision recorded now, names every
	// object it names: until then it is the only record of them.
	Owned []vidrav1alpha1.ManagedResource
}

// Recorded is what Record did.
type Recorded struct {
	// Number is the number of the revision delivered now; 0 when none is kept.
	Number int64
	// Inventory is what that revision names (nil for a revision recorded without one).
	Inventory []vidrav1alpha1.ManagedResource
	// Pending is what revisions numbered above Entry.Delivered named before this record:
	// recorded, and perhaps applied, by a reconcile that never wrote its status.
	Pending []vidrav1alpha1.ManagedResource
	// Read says the revisions were read, so Pending is complete even when Record failed.
	Read bool
}

// Record makes the content the VidraResource delivers now its newest revision and returns
// that revision's number. Content delivered before gets a new number (as a Deployment's
// rollback does), so the numbers say in which order contents were delivered. Revisions
// beyond the limit are deleted, oldest first. With a limit of 0 none is kept and 0 is
// returned.
func (h *History) Record(ctx context.Context, vr *vidrav1alpha1.VidraResource, e Entry) (Recorded, error) {
	revisions, err := h.list(ctx, vr)
	if err != nil {
		return Recorded{}, err
	}
	rec := Recorded{Pending: pending(revisions, e.Delivered), Read: true}
	keep := func(named []vidrav1alpha1.ManagedResource) func(*appsv1.ControllerRevision) bool {
		recorded := nameSet(e.Owned, named)
		return func(cr *appsv1.ControllerRevision) bool {
			return cr.Revision > e.Delivered && !recorded.covers(inventoryOf(cr))
		}
	}
	if e.Limit <= 0 {
		return rec, h.prune(ctx, revisions, 0, keep(nil))
	}
	var newest, same *appsv1.ControllerRevision
	for i := range revisions {
		cr := &revisions[i]
		if newest == nil || cr.Revision > newest.Revision {
			newest = cr
		}
		if cr.Annotations[vidrav1alpha1.RevisionDigestAnnotation] == e.Digest {
			same = cr
		}
	}
	if same != nil && same == newest {
		rec.Number, rec.Inventory = same.Revision, inventoryOf(same)
		return rec, h.prune(ctx, revisions, e.Limit, keep(rec.Inventory)) // a lowered limit applies at once
	}
	next := int64(1)
	if newest != nil {
		next = newest.Revision + 1
		if e.PreviousResult != "" && newest.Annotations[vidrav1alpha1.RevisionResultAnnotation] == "" {
			patched := newest.DeepCopy()
			if patched.Annotations == nil {
				patched.Annotations = map[string]string{}
			}
			patched.Annotations[vidrav1alpha1.RevisionResultAnnotation] = e.PreviousResult
			if err := h.Client.Patch(ctx, patched, client.MergeFrom(newest)); err != nil && !apierrors.IsNotFound(err) {
				return rec, fmt.Errorf("record the result of revision %d of %s: %w", newest.Revision, vr.Name, err)
			}
		}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	if same != nil {
		// Delivered again: it becomes the newest.
		patched := same.DeepCopy()
		if patched.Annotations == nil {
			patched.Annotations = map[string]string{}
		}
		patched.Revision = next
		patched.Annotations[vidrav1alpha1.RevisionSourceAnnotation] = e.Source
		patched.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = e.SyncRevision
		patched.Annotations[checksumAnnotation] = e.Checksum
		patched.Annotations[recordedAnnotation] = now
		delete(patched.Annotations, vidrav1alpha1.RevisionResultAnnotation)
		if err := h.Client.Patch(ctx, patched, client.MergeFromWithOptions(same, client.MergeFromWithOptimisticLock{})); err != nil {
			return rec, fmt.Errorf("renumber revision %d of %s: %w", same.Revision, vr.Name, err)
		}
		same.Revision = next // pruned by its new number: it is the newest
		rec.Number, rec.Inventory = next, inventoryOf(same)
		return rec, h.prune(ctx, revisions, e.Limit, keep(rec.Inventory))
	}
	// The new revision names what it applies and what pending revisions named: once it
	// is written, they are no longer the only record of their objects.
	inventory := union(e.Inventory, rec.Pending)
	raw, err := h.encode(e.Body, inventory)
	if err != nil {
		return rec, fmt.Errorf("revision of %s: %w", vr.Name, err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(vr.Name, e.Digest),
			Namespace: h.Namespace,
			Labels:    map[string]string{vidrav1alpha1.RevisionOfLabel: string(vr.UID)},
			Annotations: map[string]string{
				vidrav1alpha1.RevisionDigestAnnotation: e.Digest,
				vidrav1alpha1.RevisionSourceAnnotation: e.Source,
				vidrav1alpha1.SyncRevisionAnnotation:   e.SyncRevision,
				checksumAnnotation:                     e.Checksum,
				recordedAnnotation:                     now,
				vidraResourceAnnotation:                vr.Name,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: vidrav1alpha1.GroupVersion.String(), Kind: "VidraResource",
				Name: vr.Name, UID: vr.UID, Controller: ptr.To(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: next,
	}
	if sync := vr.Labels[vidrav1alpha1.InfrahubSyncLabel]; sync != "" {
		cr.Labels[vidrav1alpha1.InfrahubSyncLabel] = sync
	}
	if err := h.Client.Create(ctx, cr); err != nil {
		return rec, fmt.Errorf("create revision %d of %s: %w", next, vr.Name, err)
	}
	rec.Number, rec.Inventory = next, inventory
	return rec, h.prune(ctx, append(revisions, *cr), e.Limit, keep(inventory))
}

// Pending is what the VidraResource's revisions numbered above the one its status says
// it delivered name: objects a reconcile recorded, and perhaps applied, before it
// stopped without writing its status.
func (h *History) Pending(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]vidrav1alpha1.ManagedResource, error) {
	revisions, err := h.list(ctx, vr)
	if err != nil {
		return nil, err
	}
	return pending(revisions, vr.Status.Revision), nil
}

// identity is an inventory entry's object, whatever version names it.
func identity(m vidrav1alpha1.ManagedResource) string {
	ref, _ := ownership.EntryRef(m)
	return ref.Key()
}

// names is a set of objects, by identity.
type names map[string]bool

// nameSet is the objects the lists name.
func nameSet(lists ...[]vidrav1alpha1.ManagedResource) names {
	n := names{}
	for _, list := range lists {
		for _, m := range list {
			n[identity(m)] = true
		}
	}
	return n
}

// covers says whether n names every object of want.
func (n names) covers(want []vidrav1alpha1.ManagedResource) bool {
	for _, m := range want {
		if !n[identity(m)] {
			return false
		}
	}
	return true
}

// union is a's entries and those of b that a does not name.
func union(a, b []vidrav1alpha1.ManagedResource) []vidrav1alpha1.ManagedResource {
	out := slices.Clone(a)
	named := nameSet(a)
	for _, m := range b {
		if id := identity(m); !named[id] {
			named[id] = true
			out = append(out, vidrav1alpha1.ManagedResource{APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name})
		}
	}
	return out
}

func pending(revisions []appsv1.ControllerRevision, delivered int64) []vidrav1alpha1.ManagedResource {
	var out []vidrav1alpha1.ManagedResource
	for i := range revisions {
		if revisions[i].Revision > delivered {
			out = append(out, inventoryOf(&revisions[i])...)
		}
	}
	return out
}

// inventoryOf is what a revision names; nil when it names nothing or cannot be read (a
// revision recorded before revisions held inventories).
func inventoryOf(cr *appsv1.ControllerRevision) []vidrav1alpha1.ManagedResource {
	var d struct { // only the inventory: the content is not decoded
		Inventory []vidrav1alpha1.ManagedResource `json:"inventory"`
	}
	if err := json.Unmarshal(cr.Data.Raw, &d); err != nil {
		return nil
	}
	return d.Inventory
}

// recordedAnnotation is when the revision was last delivered; vidraResourceAnnotation
// names its VidraResource for people (the label holds its UID).
const (
	recordedAnnotation      = "vidra.infrahub.operators.com/recorded-at"
	vidraResourceAnnotation = "vidra.infrahub.operators.com/vidraresource"
	checksumAnnotation      = vidrav1alpha1.ArtifactChecksumAnnotation
)

// prune deletes the oldest revisions beyond limit, but none that keep (nil: none) holds.
func (h *History) prune(ctx context.Context, revisions []appsv1.ControllerRevision, limit int, keep func(*appsv1.ControllerRevision) bool) error {
	if len(revisions) <= limit {
		return nil
	}
	slices.SortFunc(revisions, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	var errs []error
	for _, cr := range revisions[:len(revisions)-limit] {
		if keep != nil && keep(&cr) {
			continue
		}
		if err := h.Client.Delete(ctx, &cr, client.Preconditions{UID: &cr.UID}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete revision %s: %w", cr.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Forget deletes every revision of the VidraResource, as the garbage collector would once
// it is gone: its stored content is then free to be collected at once.
func (h *History) Forget(ctx context.Context, vr *vidrav1alpha1.VidraResource) error {
	revisions, err := h.list(ctx, vr)
	if err != nil {
		return err
	}
	return h.prune(ctx, revisions, 0, nil)
}

// List returns the VidraResource's revisions, oldest first.
func (h *History) List(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]Revision, error) {
	crs, err := h.list(ctx, vr)
	if err != nil {
		return nil, err
	}
	out := make([]Revision, 0, len(crs))
	for i := range crs {
		rev, err := decode(&crs[i])
		if err != nil {
			return nil, fmt.Errorf("revision %s: %w", crs[i].Name, err)
		}
		out = append(out, rev)
	}
	slices.SortFunc(out, func(a, b Revision) int { return int(a.Number - b.Number) })
	return out, nil
}

// Get returns revision number of the VidraResource.
func (h *History) Get(ctx context.Context, vr *vidrav1alpha1.VidraResource, number int64) (Revision, error) {
	revisions, err := h.List(ctx, vr)
	if err != nil {
		return Revision{}, err
	}
	for _, r := range revisions {
		if r.Number == number {
			return r, nil
		}
	}
	return Revision{}, fmt.Errorf("%s has no revision %d (it keeps %d: %s)", vr.Name, number, len(revisions), numbers(revisions))
}

// Previous returns the revision delivered before the newest.
func (h *History) Previous(ctx context.Context, vr *vidrav1alpha1.VidraResource) (Revision, error) {
	revisions, err := h.List(ctx, vr)
	if err != nil {
		return Revision{}, err
	}
	if len(revisions) < 2 {
		return Revision{}, fmt.Errorf("%s has no revision before the one it delivers (it keeps %s)", vr.Name, numbers(revisions))
	}
	return revisions[len(revisions)-2], nil
}

func numbers(revisions []Revision) string {
	if len(revisions) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(revisions))
	for _, r := range revisions {
		parts = append(parts, fmt.Sprint(r.Number))
	}
	return strings.Join(parts, ", ")
}

func (h *History) list(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]appsv1.ControllerRevision, error) {
	var list appsv1.ControllerRevisionList
	if err := h.Reader.List(ctx, &list, client.InNamespace(h.Namespace), client.MatchingLabels{vidrav1alpha1.RevisionOfLabel: string(vr.UID)}); err != nil {
		return nil, fmt.Errorf("list revisions of %s: %w", vr.Name, err)
	}
	return list.Items, nil
}

func (h *History) encode(b Body, inventory []vidrav1alpha1.ManagedResource) ([]byte, error) {
	d := data{Content: b.Content, Inventory: inventory}
	if b.Content == nil {
		var buf bytes.Buffer
		zw, ok := h.compressors.Get().(*gzip.Writer)
		if ok {
			zw.Reset(&buf)
		} else {
			zw = gzip.NewWriter(&buf)
		}
		if _, err := zw.Write([]byte(b.Manifest)); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		h.compressors.Put(zw)
		d.Manifest = buf.Bytes()
	}
	return json.Marshal(d)
}

func decode(cr *appsv1.ControllerRevision) (Revision, error) {
	rev := Revision{
		Name:         cr.Name,
		Number:       cr.Revision,
		Digest:       cr.Annotations[vidrav1alpha1.RevisionDigestAnnotation],
		Source:       cr.Annotations[vidrav1alpha1.RevisionSourceAnnotation],
		SyncRevision: cr.Annotations[vidrav1alpha1.SyncRevisionAnnotation],
		Result:       cr.Annotations[vidrav1alpha1.RevisionResultAnnotation],
		Checksum:     cr.Annotations[checksumAnnotation],
		Recorded:     cr.CreationTimestamp.Time,
	}
	if t, err := time.Parse(time.RFC3339, cr.Annotations[recordedAnnotation]); err == nil {
		rev.Recorded = t
	}
	var d data
	if err := json.Unmarshal(cr.Data.Raw, &d); err != nil {
		return rev, fmt.Errorf("decode: %w", err)
	}
	if d.Content != nil {
		rev.Body.Content = d.Content
		return rev, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(d.Manifest))
	if err != nil {
		return rev, fmt.Errorf("decompress: %w", err)
	}
	manifest, err := io.ReadAll(io.LimitReader(zr, maxManifest+1))
	if err != nil {
		return rev, fmt.Errorf("decompress: %w", err)
	}
	if len(manifest) > maxManifest {
		return rev, fmt.Errorf("manifest over %d bytes", maxManifest)
	}
	rev.Body.Manifest = string(manifest)
	return rev, nil
}

// maxManifest bounds what an inline revision decompresses to: more than a VidraResource
// holds inline, far less than memory.
const maxManifest = 8 << 20

// Restore writes revision r's content back to the VidraResource, which then applies it as
// any change. One an InfrahubSync made is pinned there: the sync leaves its content alone
// until its rollout is resumed.
func Restore(ctx context.Context, c client.Client, vr *vidrav1alpha1.VidraResource, r Revision) error {
	// Optimistic, so a change written meanwhile (by its sync, say) is read and kept
	// rather than overwritten; then tried again on the fresh object.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vr), vr); err != nil {
			return err
		}
		base := vr.DeepCopy()
		vr.Spec.Manifest, vr.Spec.Content = r.Body.Manifest, r.Body.Content
		if vr.Labels[vidrav1alpha1.InfrahubSyncLabel] != "" {
			if vr.Annotations == nil {
				vr.Annotations = map[string]string{}
			}
			vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] = strconv.FormatInt(r.Number, 10)
			// What it delivers now is that revision's, for the sync and the history.
			setOrDelete(vr.Annotations, vidrav1alpha1.SyncRevisionAnnotation, r.SyncRevision)
			setOrDelete(vr.Annotations, vidrav1alpha1.ArtifactChecksumAnnotation, r.Checksum)
		}
		return c.Patch(ctx, vr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("roll %s back to revision %d: %w", vr.Name, r.Number, err)
	}
	return nil
}

func setOrDelete(m map[string]string, key, value string) {
	if value == "" {
		delete(m, key)
		return
	}
	m[key] = value
}

// Digests returns the stored content the revisions in the namespace name, so the content
// store keeps it while a revision may be rolled back to.
func Digests(reader client.Reader, namespace string) func(context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		var list appsv1.ControllerRevisionList
		if err := reader.List(ctx, &list, client.InNamespace(namespace), client.HasLabels{vidrav1alpha1.RevisionOfLabel}); err != nil {
			return nil, fmt.Errorf("list revisions: %w", err)
		}
		named := map[string]bool{}
		for i := range list.Items {
			var d struct { // only the content's reference: no manifest or inventory decoded
				Content *vidrav1alpha1.ContentReference `json:"content"`
			}
			if err := json.Unmarshal(list.Items[i].Data.Raw, &d); err == nil && d.Content != nil {
				named[d.Content.Digest] = true
			}
		}
		return named, nil
	}
}
