package history

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// data is what a ControllerRevision holds.
type data struct {
	// Manifest is the gzip-compressed manifest, as revisions recorded without a content
	// store (and by versions before one kept every revision's manifest) hold it.
	Manifest []byte `json:"manifest,omitempty"`
	// Content names stored content instead.
	Content *vidrav1alpha1.ContentReference `json:"content,omitempty"`
	// Inventory names the objects the revision applies, recorded before any is applied.
	Inventory []vidrav1alpha1.ManagedResource `json:"inventory,omitempty"`
}

// recordedAnnotation is when the revision was last delivered; vidraResourceAnnotation
// names its VidraResource for people (the label holds its UID).
const (
	recordedAnnotation      = "vidra.infrahub.operators.com/recorded-at"
	vidraResourceAnnotation = "vidra.infrahub.operators.com/vidraresource"
	checksumAnnotation      = vidrav1alpha1.BundleChecksumAnnotation
)

// encode is what a revision of body holds: only a reference when the body is stored
// content or a store takes it (a manifest may hold Secrets, and Kubernetes' view role
// reads ControllerRevisions, never Secrets), else the manifest compressed. stored says
// which.
func (h *History) encode(ctx context.Context, b Body, inventory []vidrav1alpha1.ManagedResource) (raw []byte, stored bool, err error) {
	d := data{Content: b.Content, Inventory: inventory}
	switch {
	case b.Content != nil:
	case h.Store != nil:
		digest, err := h.Store.Put(ctx, []byte(b.Manifest))
		if err != nil {
			return nil, false, fmt.Errorf("store the manifest: %w", err)
		}
		d.Content = &vidrav1alpha1.ContentReference{Digest: digest}
	default:
		if d.Manifest, err = h.compress(b.Manifest); err != nil {
			return nil, false, err
		}
	}
	raw, err = json.Marshal(d)
	return raw, d.Content != nil, err
}

func (h *History) compress(manifest string) ([]byte, error) {
	var buf bytes.Buffer
	zw, ok := h.compressors.Get().(*gzip.Writer)
	if ok {
		zw.Reset(&buf)
	} else {
		zw = gzip.NewWriter(&buf)
	}
	if _, err := zw.Write([]byte(manifest)); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	h.compressors.Put(zw)
	return buf.Bytes(), nil
}

func decode(cr *appsv1.ControllerRevision) (Revision, error) {
	rev := Revision{
		Name:         cr.Name,
		Number:       cr.Revision,
		Digest:       cr.Annotations[vidrav1alpha1.RevisionDigestAnnotation],
		Source:       cr.Annotations[vidrav1alpha1.RevisionSourceAnnotation],
		SyncRevision: cr.Annotations[vidrav1alpha1.SyncRevisionAnnotation],
		Result:       cr.Annotations[vidrav1alpha1.RevisionResultAnnotation],
		Checksum:     vidrav1alpha1.BundleAnnotation(cr.Annotations, checksumAnnotation),
		Recorded:     cr.CreationTimestamp.Time,
	}
	rev.SourceRevision = SourceRevision(rev.Source)
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
	manifest, err := decompress(d.Manifest)
	if err != nil {
		return rev, err
	}
	rev.Body.Manifest = manifest
	return rev, nil
}

// decompress is an inline revision's manifest, within maxManifest.
func decompress(compressed []byte) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return "", fmt.Errorf("decompress: %w", err)
	}
	manifest, err := io.ReadAll(io.LimitReader(zr, maxManifest+1))
	if err != nil {
		return "", fmt.Errorf("decompress: %w", err)
	}
	if len(manifest) > maxManifest {
		return "", fmt.Errorf("manifest over %d bytes", maxManifest)
	}
	return string(manifest), nil
}

// maxManifest bounds what an inline revision decompresses to: more than a VidraResource
// holds inline, far less than memory.
const maxManifest = 8 << 20
