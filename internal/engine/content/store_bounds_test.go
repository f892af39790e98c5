package content_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/engine/content"
)

// countingReader counts the objects read through it.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// writeChunks writes n chunks of chunkBytes each, every one well formed (its index and
// sha256 recorded), under a content whose chunk 0 records size: what a store that was
// tampered with, or a writer gone wrong, may leave.
func writeChunks(t *testing.T, s *content.Store, digest string, n, chunkBytes int, size int64) {
	t.Helper()
	for i := range n {
		data := incompressible(uint64(100+i), chunkBytes)
		sum := sha256.Sum256(data)
		cm := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: content.ChunkName(digest, i), Namespace: s.Namespace, Labels: map[string]string{content.ChunkLabel: "true"},
				Annotations: map[string]string{
					content.DigestAnnotation:      digest,
					content.IndexAnnotation:       fmt.Sprintf("%d/%d", i, n),
					content.ChunkSHA256Annotation: hex.EncodeToString(sum[:]),
				},
			},
			Type: content.ChunkType,
			Data: map[string][]byte{"chunk": data},
		}
		if i == 0 {
			cm.Annotations[content.SizeAnnotation] = strconv.FormatInt(size, 10)
			cm.Annotations[content.MD5Annotation] = content.MD5(data)
		}
		if err := hub.Client.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChunksHoldingMoreThanTheirContentAreRefusedBeforeTheyAreJoined: chunks whose bytes
// add up to more than the size chunk 0 records can take compressed are refused as soon
// as the sum goes over, naming the content; the chunks after that one are never read,
// so a content that declares many chunks cannot make a reader hold them all.
func TestChunksHoldingMoreThanTheirContentAreRefusedBeforeTheyAreJoined(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 0)
	digest := content.Digest([]byte("declares 3000 bytes, holds 15000"))
	// 3,000 bytes take at most about 4 KiB compressed: chunk 2 takes the sum to 4,500.
	writeChunks(t, s, digest, 10, 1500, 3000)
	reader := &countingReader{Reader: hub.Client}
	fresh := &content.Store{Client: hub.Client, Reader: reader, Namespace: s.Namespace}
	got, err := fresh.Get(ctx, digest)
	if got != nil || !errors.Is(err, content.ErrUnavailable) {
		t.Fatalf("Get = %d bytes, %v; want nothing and ErrUnavailable", len(got), err)
	}
	if !strings.Contains(err.Error(), "chunks 0 to 2 of 10") || !strings.Contains(err.Error(), "4500 bytes") {
		t.Errorf("error %q does not say which chunks went over, and by how much", err)
	}
	if n := reader.gets.Load(); n != 3 {
		t.Errorf("%d chunks read, want 3: none after the one that went over", n)
	}

	// The same chunks under a content that may take them: read to the end (they then
	// fail as content, not as size).
	other := content.Digest([]byte("declares enough"))
	writeChunks(t, s, other, 10, 1500, 64<<10)
	reader.gets.Store(0)
	_, err = fresh.Get(ctx, other)
	if !errors.Is(err, content.ErrUnavailable) || strings.Contains(err.Error(), "more than") || reader.gets.Load() != 10 {
		t.Errorf("chunks within their size: %v after %d reads, want every chunk read and a decompression error", err, reader.gets.Load())
	}
}
