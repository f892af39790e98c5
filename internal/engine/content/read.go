package content

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// chunkKind is the kind of object chunks are kept in: Secrets, or the ConfigMaps an
// earlier version kept them in, read until the Collector has moved them.
type chunkKind string

const (
	secretChunks chunkKind = "Secret"
	legacyChunks chunkKind = "ConfigMap"
)

func (k chunkKind) newObject() client.Object {
	if k == legacyChunks {
		return &corev1.ConfigMap{}
	}
	return &corev1.Secret{}
}

func (k chunkKind) data(o client.Object) []byte {
	switch o := o.(type) {
	case *corev1.Secret:
		return o.Data[dataKey]
	case *corev1.ConfigMap:
		return o.BinaryData[dataKey]
	}
	return nil
}

// Stat reads what chunk 0 records of the content, without its chunks.
func (s *Store) Stat(ctx context.Context, digest string) (Info, error) {
	head, kind, err := s.head(ctx, digest)
	if err != nil {
		return Info{}, err
	}
	return s.verifyHead(kind, head, digest)
}

// Get returns the content with digest after checking every chunk against its recorded
// sha256 and the whole against the digest. Errors that say the content cannot be read as
// stored wrap ErrUnavailable and name the chunk.
func (s *Store) Get(ctx context.Context, digest string) ([]byte, error) {
	if data, ok := s.recall(digest); ok {
		return data, nil
	}
	head, kind, err := s.head(ctx, digest)
	if err != nil {
		return nil, err
	}
	data, err := s.read(ctx, digest, kind, head)
	if err != nil {
		return nil, err
	}
	s.remember(digest, data)
	return data, nil
}

// head reads chunk 0 of the content: its Secret, else the ConfigMap an earlier version
// wrote.
func (s *Store) head(ctx context.Context, digest string) (client.Object, chunkKind, error) {
	if !digestPattern.MatchString(digest) {
		return nil, secretChunks, fmt.Errorf("%q is not a content digest (sha256:<64 hex digits>): %w", digest, ErrUnavailable)
	}
	name := ChunkName(digest, 0)
	for _, kind := range []chunkKind{secretChunks, legacyChunks} {
		head := kind.newObject()
		err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, head)
		switch {
		case err == nil:
			return head, kind, nil
		case kind == legacyChunks && apierrors.IsForbidden(err):
			// One who may not read ConfigMaps there reads no content kept in them.
		case !apierrors.IsNotFound(err):
			return nil, kind, fmt.Errorf("read content %s: %w", digest, err)
		}
	}
	return nil, secretChunks, fmt.Errorf("content %s is not stored (no Secret %s/%s): %w", digest, s.Namespace, name, ErrUnavailable)
}

// verifyHead checks chunk 0's records.
func (s *Store) verifyHead(kind chunkKind, head client.Object, digest string) (Info, error) {
	notes := head.GetAnnotations()
	info := Info{Digest: digest, MD5: notes[MD5Annotation]}
	where := fmt.Sprintf("%s %s/%s", kind, s.Namespace, head.GetName())
	if notes[DigestAnnotation] != digest {
		return info, fmt.Errorf("chunk 0 of content %s (%s) is of content %q: %w", digest, where, notes[DigestAnnotation], ErrUnavailable)
	}
	i, n, err := parseIndex(notes[IndexAnnotation])
	if err != nil || i != 0 {
		return info, fmt.Errorf("chunk 0 of content %s (%s) has a bad index %q: %w", digest, where, notes[IndexAnnotation], ErrUnavailable)
	}
	info.Chunks = n
	info.Size, err = strconv.ParseInt(notes[SizeAnnotation], 10, 64)
	if err != nil || info.Size < 0 || info.Size > MaxSize {
		return info, fmt.Errorf("chunk 0 of content %s (%s) has a bad size %q: %w", digest, where, notes[SizeAnnotation], ErrUnavailable)
	}
	return info, nil
}

// read reads and verifies the content from the API server, from its chunk 0, of kind.
func (s *Store) read(ctx context.Context, digest string, kind chunkKind, head client.Object) ([]byte, error) {
	info, err := s.verifyHead(kind, head, digest)
	if err != nil {
		return nil, err
	}
	// The chunks are joined only as far as the content chunk 0 records can take
	// compressed: chunks that hold more are refused before they are held, not after.
	bound := compressedBound(info.Size)
	var compressed bytes.Buffer
	for i := range info.Chunks {
		obj := head
		if i > 0 {
			if obj, err = s.readChunk(ctx, kind, digest, i, info.Chunks); err != nil {
				return nil, err
			}
		}
		chunk, err := s.chunkData(kind, obj, digest, i, info.Chunks)
		if err != nil {
			return nil, err
		}
		if joined := int64(compressed.Len()) + int64(len(chunk)); joined > bound {
			return nil, fmt.Errorf("chunks 0 to %d of %d of content %s hold %d bytes, more than %d bytes of content (as chunk 0 records) can take compressed (%d): %w",
				i, info.Chunks, digest, joined, info.Size, bound, ErrUnavailable)
		}
		compressed.Write(chunk)
	}
	data, err := decompress(compressed.Bytes(), info.Size)
	if err != nil {
		return nil, fmt.Errorf("content %s does not decompress: %w: %w", digest, ErrUnavailable, err)
	}
	want := digest
	if sealed := head.GetAnnotations()[SealedSHA256Annotation]; sealed != "" {
		want = sealed // content sealed under an address of what it was made from
	}
	if Digest(data) != want {
		return nil, fmt.Errorf("content %s does not read back as it was stored: %w", digest, ErrUnavailable)
	}
	return data, nil
}

// readChunk reads chunk i of n of the content.
func (s *Store) readChunk(ctx context.Context, kind chunkKind, digest string, i, n int) (client.Object, error) {
	name := ChunkName(digest, i)
	obj := kind.newObject()
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("chunk %d of %d of content %s is missing (%s %s/%s): %w", i, n, digest, kind, s.Namespace, name, ErrUnavailable)
		}
		return nil, fmt.Errorf("read chunk %d of content %s: %w", i, digest, err)
	}
	return obj, nil
}

// chunkData is the bytes of chunk i of n, checked against what the chunk records.
func (s *Store) chunkData(kind chunkKind, obj client.Object, digest string, i, n int) ([]byte, error) {
	data := kind.data(obj)
	sum := sha256.Sum256(data)
	notes := obj.GetAnnotations()
	if notes[DigestAnnotation] != digest || notes[IndexAnnotation] != fmt.Sprintf("%d/%d", i, n) ||
		notes[ChunkSHA256Annotation] != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("chunk %d of %d of content %s is corrupted (%s %s/%s does not match its recorded sha256, digest or index): %w",
			i, n, digest, kind, s.Namespace, obj.GetName(), ErrUnavailable)
	}
	return data, nil
}
