package content_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/engine/content"
)

// putAsConfigMaps stores data as the store kept content before it used Secrets: gzip,
// split into ConfigMaps of chunkSize bytes, chunk 0 recording the whole. storedAt is
// chunk 0's stored-at time.
func putAsConfigMaps(t *testing.T, s *content.Store, data []byte, chunkSize int, storedAt time.Time) string {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	compressed, digest := buf.Bytes(), content.Digest(data)
	n := (len(compressed) + chunkSize - 1) / chunkSize
	for i := range n {
		chunk := compressed[i*chunkSize : min((i+1)*chunkSize, len(compressed))]
		sum := sha256.Sum256(chunk)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: content.ChunkName(digest, i), Namespace: s.Namespace, Labels: map[string]string{content.ChunkLabel: "true"},
				Annotations: map[string]string{
					content.DigestAnnotation:      digest,
					content.IndexAnnotation:       fmt.Sprintf("%d/%d", i, n),
					content.ChunkSHA256Annotation: hex.EncodeToString(sum[:]),
				},
			},
			BinaryData: map[string][]byte{"chunk": chunk},
		}
		if i == 0 {
			cm.Annotations[content.SizeAnnotation] = strconv.Itoa(len(data))
			cm.Annotations[content.MD5Annotation] = content.MD5(data)
			cm.Annotations[content.StoredAtAnnotation] = storedAt.UTC().Format(time.RFC3339)
		}
		if err := hub.Client.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	}
	return digest
}

func configMapChunks(t *testing.T, s *content.Store) []corev1.ConfigMap {
	t.Helper()
	var list corev1.ConfigMapList
	if err := hub.Client.List(context.Background(), &list, client.InNamespace(s.Namespace), client.HasLabels{content.ChunkLabel}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestContentKeptInConfigMapsIsReadThenMovedIntoSecrets: content an earlier version kept
// in ConfigMaps (which Kubernetes' view role reads) is read as before; the collector
// stores it again in Secrets and deletes the ConfigMaps, or deletes it when it is unnamed
// past its grace; the moved content reads back.
func TestContentKeptInConfigMapsIsReadThenMovedIntoSecrets(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 64<<10)
	named, unnamed := incompressible(7, 200<<10), incompressible(8, 10<<10)
	namedDigest := putAsConfigMaps(t, s, named, 64<<10, time.Now().Add(-2*time.Hour))
	unnamedDigest := putAsConfigMaps(t, s, unnamed, 64<<10, time.Now())

	reader := &content.Store{Client: hub.Client, Reader: hub.Client, Namespace: s.Namespace}
	if got, err := reader.Get(ctx, namedDigest); err != nil || !bytes.Equal(got, named) {
		t.Fatalf("content kept in ConfigMaps: %d bytes, %v", len(got), err)
	}
	if info, err := reader.Stat(ctx, namedDigest); err != nil || info.Size != int64(len(named)) || info.Chunks < 3 {
		t.Errorf("Stat of content kept in ConfigMaps = %+v, %v", info, err)
	}

	collector := &content.Collector{Store: s, InUse: func(context.Context) (map[string]bool, error) {
		return map[string]bool{namedDigest: true}, nil
	}}
	if deleted, err := collector.Collect(ctx); err != nil || len(deleted) != 0 {
		t.Fatalf("Collect within the grace period deleted %v, %v; want it to move every content", deleted, err)
	}
	if left := configMapChunks(t, s); len(left) != 0 {
		t.Errorf("%d ConfigMaps of content left after the move, want none (the first: %s)", len(left), left[0].Name)
	}
	moved := map[string]int{}
	for _, secret := range chunks(t, s) {
		if secret.Type != content.ChunkType {
			t.Errorf("Secret %s is of type %q, want %q", secret.Name, secret.Type, content.ChunkType)
		}
		moved[secret.Annotations[content.DigestAnnotation]]++
	}
	if moved[namedDigest] < 3 || moved[unnamedDigest] != 1 {
		t.Errorf("chunk Secrets by content: %v; want both contents moved", moved)
	}
	for digest, want := range map[string][]byte{namedDigest: named, unnamedDigest: unnamed} {
		again := &content.Store{Client: hub.Client, Reader: hub.Client, Namespace: s.Namespace}
		if got, err := again.Get(ctx, digest); err != nil || !bytes.Equal(got, want) {
			t.Errorf("moved content %s reads back as %d bytes, %v", digest, len(got), err)
		}
	}

	// Unnamed past its grace: deleted where it is, not moved.
	gone := putAsConfigMaps(t, s, incompressible(10, 10<<10), 64<<10, time.Now())
	s.Grace = 0
	deleted, err := collector.Collect(ctx)
	if err != nil || !slices.Contains(deleted, gone) || slices.Contains(deleted, namedDigest) {
		t.Errorf("Collect past the grace period deleted %v, %v; want %s among them and not %s", deleted, err, gone, namedDigest)
	}
	if left := configMapChunks(t, s); len(left) != 0 {
		t.Errorf("%d ConfigMaps of unnamed content past its grace left", len(left))
	}
	for _, secret := range chunks(t, s) {
		if d := secret.Annotations[content.DigestAnnotation]; d != namedDigest {
			t.Errorf("Secret %s of unnamed content %s left past its grace", secret.Name, d)
		}
	}
}
