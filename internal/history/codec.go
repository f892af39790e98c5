package history

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// data is what a ControllerRevision holds.
type data struct {
	// Manifest is the gzip-compressed manifest.
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
	checksumAnnotation      = vidrav1alpha1.ArtifactChecksumAnnotation
)

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
