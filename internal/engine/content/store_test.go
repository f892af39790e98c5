package content_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/engine/content"
)

// newStore returns a store in a namespace of its own on the hub.
func newStore(t *testing.T, chunkSize int) *content.Store {
	t.Helper()
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	ns = ns[:min(len(ns), 50)]
	if err := hub.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return &content.Store{Client: hub.Client, Reader: hub.Client, Namespace: ns, ChunkSize: chunkSize, Grace: time.Hour}
}

// incompressible returns n bytes of YAML-safe text that gzip barely shrinks, so a
// content of n bytes takes several chunks.
func incompressible(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return b
}

func chunks(t *testing.T, s *content.Store) []corev1.Secret {
	t.Helper()
	var list corev1.SecretList
	if err := hub.Client.List(context.Background(), &list, client.InNamespace(s.Namespace), client.HasLabels{content.ChunkLabel}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestContentOverTheObjectLimitIsStoredInChunksAndReadBack: 6 MiB that do not compress
// are stored (no object may exceed the API server's limit) at the default chunk size and
// read back byte for byte.
func TestContentOverTheObjectLimitIsStoredInChunksAndReadBack(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 0)
	data := incompressible(1, 6<<20)
	digest, err := s.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if digest != content.Digest(data) {
		t.Errorf("digest %s, want %s", digest, content.Digest(data))
	}
	stored := chunks(t, s)
	if len(stored) < 6 {
		t.Errorf("%d chunks for 6 MiB of nearly incompressible data, want several", len(stored))
	}
	for _, cm := range stored {
		if n := len(cm.Data["chunk"]); n > content.DefaultChunkSize {
			t.Errorf("%s holds %d bytes, over the chunk size", cm.Name, n)
		}
	}
	fresh := &content.Store{Client: hub.Client, Reader: hub.Client, Namespace: s.Namespace}
	got, err := fresh.Get(ctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Error("content read back differs")
	}
	info, err := fresh.Stat(ctx, digest)
	if err != nil || info.Size != int64(len(data)) || info.Chunks != len(stored) || len(info.MD5) != 32 {
		t.Errorf("Stat = %+v, %v", info, err)
	}
}

// TestSameContentIsStoredOnce: a second Put of the same bytes writes nothing.
func TestSameContentIsStoredOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 64<<10)
	data := incompressible(2, 200<<10)
	first, err := s.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	before := chunks(t, s)
	second, err := s.Put(ctx, data)
	if err != nil || second != first {
		t.Fatalf("second Put: %s, %v", second, err)
	}
	after := chunks(t, s)
	if len(after) != len(before) {
		t.Fatalf("%d chunks after the second Put, %d before", len(after), len(before))
	}
	for i := range after {
		if after[i].ResourceVersion != before[i].ResourceVersion {
			t.Errorf("%s was written again", after[i].Name)
		}
	}
}

// TestDamagedContentIsRefusedNamingTheChunk: a corrupted chunk and a missing chunk are
// errors that name the chunk's Secret, and nothing is returned.
func TestDamagedContentIsRefusedNamingTheChunk(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"corrupted", "missing"} {
		t.Run(damage, func(t *testing.T) {
			s := newStore(t, 64<<10)
			digest, err := s.Put(ctx, incompressible(3, 300<<10))
			if err != nil {
				t.Fatal(err)
			}
			name := content.ChunkName(digest, 2)
			cm := &corev1.Secret{}
			if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, cm); err != nil {
				t.Fatal(err)
			}
			if damage == "corrupted" {
				cm.Data["chunk"][10] ^= 0xff
				err = hub.Client.Update(ctx, cm)
			} else {
				err = hub.Client.Delete(ctx, cm)
			}
			if err != nil {
				t.Fatal(err)
			}
			// A reader that has not read it before: what was read once stays verified.
			fresh := &content.Store{Client: hub.Client, Reader: hub.Client, Namespace: s.Namespace}
			got, err := fresh.Get(ctx, digest)
			if got != nil || !errors.Is(err, content.ErrUnavailable) {
				t.Fatalf("Get = %d bytes, %v; want nothing and ErrUnavailable", len(got), err)
			}
			if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), damage) {
				t.Errorf("error %q does not say chunk %s is %s", err, name, damage)
			}
		})
	}
}

func TestUnknownDigestIsUnavailable(t *testing.T) {
	s := newStore(t, 0)
	for _, digest := range []string{content.Digest([]byte("never stored")), "sha256:zz", "md5:abc"} {
		if _, err := s.Get(context.Background(), digest); !errors.Is(err, content.ErrUnavailable) {
			t.Errorf("Get(%q) = %v, want ErrUnavailable", digest, err)
		}
	}
}

// TestCollectorDeletesOnlyUnnamedContentPastItsGrace: content that something names stays,
// content stored within the grace period stays, the rest goes with every chunk.
func TestCollectorDeletesOnlyUnnamedContentPastItsGrace(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 64<<10)
	named, err := s.Put(ctx, incompressible(4, 150<<10))
	if err != nil {
		t.Fatal(err)
	}
	unnamed, err := s.Put(ctx, incompressible(5, 150<<10))
	if err != nil {
		t.Fatal(err)
	}
	collector := &content.Collector{Store: s, InUse: func(context.Context) (map[string]bool, error) {
		return map[string]bool{named: true}, nil
	}}
	deleted, err := collector.Collect(ctx)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("within the grace period: deleted %v, %v", deleted, err)
	}
	s.Grace = 0
	deleted, err = collector.Collect(ctx)
	if err != nil || len(deleted) != 1 || deleted[0] != unnamed {
		t.Fatalf("past the grace period: deleted %v, %v; want only %s", deleted, err, unnamed)
	}
	for _, cm := range chunks(t, s) {
		if cm.Annotations[content.DigestAnnotation] != named {
			t.Errorf("%s of the unnamed content is left", cm.Name)
		}
	}
	if _, err := (&content.Store{Client: hub.Client, Reader: hub.Client, Namespace: s.Namespace}).Get(ctx, named); err != nil {
		t.Errorf("named content after collection: %v", err)
	}
}

// TestPutRefreshesContentSoTheCollectorKeepsIt: storing content again, as a sync does
// before naming it, restarts its grace period; the collector's conditional delete loses
// to that refresh.
func TestPutRefreshesContentSoTheCollectorKeepsIt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 64<<10)
	data := incompressible(6, 100<<10)
	digest, err := s.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	// Make it look stored two hours ago.
	head := &corev1.Secret{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: content.ChunkName(digest, 0)}, head); err != nil {
		t.Fatal(err)
	}
	head.Annotations[content.StoredAtAnnotation] = time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if err := hub.Client.Update(ctx, head); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, data); err != nil {
		t.Fatal(err)
	}
	collector := &content.Collector{Store: s, InUse: func(context.Context) (map[string]bool, error) { return nil, nil }}
	deleted, err := collector.Collect(ctx)
	if err != nil || len(deleted) != 0 {
		t.Fatalf("refreshed content was collected: %v, %v", deleted, err)
	}
}

// TestCollectorReadsWhatIsNamedOnlyWhenSomethingIsPastItsGrace: what is named is read
// from every VidraResource and revision of the fleet, so a collection with nothing to
// delete does not read it; one with content past its grace does, and keeps what is named.
func TestCollectorReadsWhatIsNamedOnlyWhenSomethingIsPastItsGrace(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, 64<<10)
	reads := 0
	collector := &content.Collector{Store: s, InUse: func(context.Context) (map[string]bool, error) {
		reads++
		return nil, errors.New("what is named could not be read")
	}}
	if deleted, err := collector.Collect(ctx); err != nil || len(deleted) != 0 || reads != 0 {
		t.Fatalf("an empty store: deleted %v, %v, what is named read %d times", deleted, err, reads)
	}
	digest, err := s.Put(ctx, incompressible(7, 100<<10))
	if err != nil {
		t.Fatal(err)
	}
	if deleted, err := collector.Collect(ctx); err != nil || len(deleted) != 0 || reads != 0 {
		t.Fatalf("content within its grace: deleted %v, %v, what is named read %d times", deleted, err, reads)
	}
	s.Grace = 0
	if deleted, err := collector.Collect(ctx); err == nil || len(deleted) != 0 || reads != 1 {
		t.Fatalf("content past its grace, what is named unreadable: deleted %v, %v, read %d times; want an error, nothing deleted, one read", deleted, err, reads)
	}
	if _, err := s.Get(ctx, digest); err != nil {
		t.Errorf("content kept when what is named could not be read: %v", err)
	}
}
