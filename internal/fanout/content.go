package fanout

import (
	"context"
	"fmt"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/manifest"
)

// body is what a VidraResource holds of an item's content: the manifest inline, or a
// reference to it in the content store.
type body struct {
	manifest string
	ref      *vidrav1alpha1.ContentReference
}

// content is item it's content. A VidraResource of the sync that already holds the
// checksum's content gives it, so the source is asked only for content no VidraResource
// holds: the VidraResources are the checksum cache, each entry checked against its
// checksum, since a person may have edited it. Downloaded content must decode as a
// manifest before it goes anywhere; content over the inline limit is stored once in the
// content store, whatever the number of VidraResources that deliver it.
func (d *Delivery) content(ctx context.Context, it Item, existing []*vidrav1alpha1.VidraResource, stale bool) (*body, error) {
	for _, vr := range existing {
		if d.holds(ctx, vr, it.Checksum) {
			return &body{manifest: vr.Spec.Manifest, ref: vr.Spec.Content.DeepCopy()}, nil
		}
	}
	if !stale {
		return nil, nil // nothing will be written
	}
	data, err := d.source.Fetch(ctx, it)
	if err != nil {
		return nil, err
	}
	if _, err := manifest.Decode(data); err != nil {
		return nil, fmt.Errorf("content is not a Kubernetes manifest: %w", err)
	}
	if content.Sealed(it.Digest, data) {
		return &body{ref: &vidrav1alpha1.ContentReference{Digest: it.Digest}}, nil
	}
	if len(data) <= d.cfg.InlineLimit {
		return &body{manifest: string(data)}, nil
	}
	if d.cfg.Content == nil {
		return nil, fmt.Errorf("content of %d bytes is over the %d bytes a VidraResource holds inline, and this operator has no content store", len(data), d.cfg.InlineLimit)
	}
	digest, err := d.cfg.Content.Put(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("store content: %w", err)
	}
	return &body{ref: &vidrav1alpha1.ContentReference{Digest: digest}}, nil
}

// holds reports whether a VidraResource delivers the content with checksum: inline, or
// stored content whose recorded MD5 is the checksum (read once per digest and sync).
func (d *Delivery) holds(ctx context.Context, vr *vidrav1alpha1.VidraResource, checksum string) bool {
	if vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleChecksumAnnotation) != checksum {
		return false
	}
	if vr.Spec.Content == nil {
		return content.MD5([]byte(vr.Spec.Manifest)) == checksum
	}
	if d.cfg.Content == nil {
		return false
	}
	digest := vr.Spec.Content.Digest
	sum, ok := d.stored[digest]
	if !ok {
		info, err := d.cfg.Content.Stat(ctx, digest)
		if err == nil {
			sum = info.MD5
		}
		d.stored[digest] = sum
	}
	return sum == checksum
}

// storeHeld stores the content with checksum that one of the VidraResources holds and
// returns its digest ("" when none holds it).
func (d *Delivery) storeHeld(ctx context.Context, vrs []*vidrav1alpha1.VidraResource, checksum string) string {
	for _, vr := range vrs {
		if !d.holds(ctx, vr, checksum) {
			continue
		}
		if vr.Spec.Content != nil {
			return vr.Spec.Content.Digest
		}
		digest, err := d.cfg.Content.Put(ctx, []byte(vr.Spec.Manifest))
		if err == nil {
			return digest
		}
	}
	return ""
}

// waiting is the newest content of an item, as what waits for a cluster: inline when
// small enough, else by reference (nil when unreadable: there is no preview then).
func (d *Delivery) waiting(ctx context.Context, st vidrav1alpha1.BundleStatus, revision string) *vidrav1alpha1.PendingContent {
	if st.Digest == "" {
		return nil
	}
	data, err := d.cfg.Content.Get(ctx, st.Digest)
	if err != nil {
		return nil
	}
	if len(data) <= d.cfg.InlineLimit && !content.Sealed(st.Digest, data) {
		return &vidrav1alpha1.PendingContent{Manifest: string(data), Revision: revision}
	}
	return &vidrav1alpha1.PendingContent{Content: &vidrav1alpha1.ContentReference{Digest: st.Digest}, Revision: revision}
}
