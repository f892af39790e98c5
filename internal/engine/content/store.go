// Package content is Vidra's content store: manifest bundles too large to sit inline in a
// VidraResource are kept on the hub, gzip-compressed, addressed by the sha256 of their
// uncompressed bytes, and split into Secrets small enough for the API server and etcd.
// Secrets, not ConfigMaps: a bundle holds manifests, Secrets' data included, and
// Kubernetes' view role, often bound cluster-wide, reads every ConfigMap and no Secret.
// Content kept in ConfigMaps by an earlier version is still read, and the Collector moves
// it into Secrets.
//
// One content is stored once, whatever number of VidraResources deliver it. Reads verify
// every chunk and the whole before returning anything, so a corrupted or missing chunk is
// an error naming it, never a partial bundle. The Collector deletes content that no
// VidraResource names once its grace period is over.
package content

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5" //nolint:gosec // Infrahub's checksum is MD5; it is recorded, never trusted alone
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/runtime/bytelru"
)

// Labels, annotations and type of the chunk Secrets.
const (
	// ChunkLabel marks a Secret (a ConfigMap, as stored before) as a chunk of stored content.
	ChunkLabel = "vidra.infrahub.operators.com/content-chunk"
	// DigestAnnotation is the content's digest, on every chunk.
	DigestAnnotation = "vidra.infrahub.operators.com/content-digest"
	// IndexAnnotation is "i/n": the chunk's index and the content's number of chunks.
	IndexAnnotation = "vidra.infrahub.operators.com/content-chunk-index"
	// ChunkSHA256Annotation is the sha256 of the chunk's bytes, to name a corrupted one.
	ChunkSHA256Annotation = "vidra.infrahub.operators.com/content-chunk-sha256"
	// SizeAnnotation is the uncompressed size in bytes, on chunk 0.
	SizeAnnotation = "vidra.infrahub.operators.com/content-size"
	// MD5Annotation is the MD5 of the uncompressed content (Infrahub's checksum), on chunk 0.
	MD5Annotation = "vidra.infrahub.operators.com/content-md5"
	// StoredAtAnnotation is when the content was last stored, on chunk 0: the collector
	// keeps unnamed content for its grace period after it.
	StoredAtAnnotation = "vidra.infrahub.operators.com/content-stored-at"

	// SealedSHA256Annotation is, on chunk 0 of sealed content (PutSealed), the digest of
	// its bytes, which its address is not.
	SealedSHA256Annotation = "vidra.infrahub.operators.com/content-sealed-sha256"

	// ChunkType is the type of the chunk Secrets.
	ChunkType corev1.SecretType = "vidra.infrahub.operators.com/content-chunk"

	// dataKey holds a chunk's bytes in the Secret's data (a ConfigMap's binaryData).
	dataKey = "chunk"
)

// DefaultChunkSize is the largest compressed chunk, in bytes: a Secret holds at most
// 1 MiB of data, and etcd takes requests of 1.5 MiB.
const DefaultChunkSize = 768 << 10

// MaxSize is the largest uncompressed content stored or read.
const MaxSize = 64 << 20

var digestPattern = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// Digest is the content address of data: "sha256:" and its hex sha256.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Sealed says whether data, read from the store under digest, is sealed content
// (PutSealed): such content is only ever named, never held inline where its readers
// are not the store's.
func Sealed(digest string, data []byte) bool {
	return digest != "" && Digest(data) != digest
}

// MD5 is content's MD5 in lowercase hex, which the store records of each content: the
// checksum Infrahub gives its artifacts, by which a sync knows content it holds.
func MD5(data []byte) string {
	sum := md5.Sum(data) //nolint:gosec // see the import
	return hex.EncodeToString(sum[:])
}

// ErrUnavailable is wrapped by every error that says content cannot be read as stored:
// missing, incomplete or corrupted.
var ErrUnavailable = errors.New("content unavailable")

// Info is what chunk 0 records of stored content.
type Info struct {
	Digest string
	Size   int64
	MD5    string
	Chunks int
}

// Store keeps content in Secrets of one namespace on the hub.
type Store struct {
	// Client writes chunks; Reader reads them from the API server (chunks are not cached,
	// so their bytes are held only while read).
	Client client.Client
	Reader client.Reader
	// Namespace holds the chunks.
	Namespace string
	// ChunkSize is the largest compressed chunk (DefaultChunkSize when 0).
	ChunkSize int
	// Grace is the collector's grace period: Put refreshes the stored-at time of content
	// stored longer ago than half of it, so content being named again is never collected.
	Grace time.Duration
	// CacheBytes bounds the verified content kept in memory (64 MiB when 0).
	CacheBytes int

	mu    sync.Mutex
	cache *bytelru.Cache
}

// ChunkName is the name of chunk i of the content with digest.
func ChunkName(digest string, i int) string {
	return "vidra-content-" + strings.TrimPrefix(digest, "sha256:") + "-" + strconv.Itoa(i)
}

// Put stores data and returns its digest. Content already stored is not written again;
// only its stored-at time is refreshed when old. Chunk 0 is written last: content exists
// only once it is whole.
func (s *Store) Put(ctx context.Context, data []byte) (string, error) {
	digest := Digest(data)
	return digest, s.put(ctx, digest, MD5(data), data, false)
}

// PutSealed stores data under address, a digest of what it was made from rather than of
// data itself, and returns the checksum recorded for it (a function of address): content
// a sync decrypted is named so, and neither name nor checksum, which VidraResources and
// statuses show to whoever reads them, is a hash of the plain text. Reads check it
// against the digest of its bytes that its chunk 0, a Secret, records.
func (s *Store) PutSealed(ctx context.Context, address string, data []byte) (string, error) {
	if !digestPattern.MatchString(address) {
		return "", fmt.Errorf("%q is not a content address (sha256:<64 hex digits>)", address)
	}
	checksum := MD5([]byte(address))
	return checksum, s.put(ctx, address, checksum, data, true)
}

// PutAs stores data read from another store under digest, its name there: sealed
// content stays sealed.
func (s *Store) PutAs(ctx context.Context, digest string, data []byte) error {
	if Digest(data) == digest {
		_, err := s.Put(ctx, data)
		return err
	}
	_, err := s.PutSealed(ctx, digest, data)
	return err
}

func (s *Store) put(ctx context.Context, digest, sum string, data []byte, sealed bool) error {
	if len(data) > MaxSize {
		return fmt.Errorf("content of %d bytes is over the %d bytes the store takes", len(data), MaxSize)
	}
	head := &corev1.Secret{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: ChunkName(digest, 0)}, head)
	switch {
	case err == nil:
		// Stored and whole, as read now (not as remembered): only refreshed. Damaged or
		// incomplete: written again below. (Content kept in ConfigMaps is written anew.)
		if _, err := s.read(ctx, digest, secretChunks, head); err == nil {
			return s.touch(ctx, head)
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("look up content %s: %w", digest, err)
	}

	compressed, err := compress(data)
	if err != nil {
		return err
	}
	size := s.ChunkSize
	if size <= 0 {
		size = DefaultChunkSize
	}
	n := max((len(compressed)+size-1)/size, 1)
	for i := n - 1; i >= 0; i-- {
		chunk := compressed[min(i*size, len(compressed)):min((i+1)*size, len(compressed))]
		secret := s.chunk(digest, i, n, chunk)
		if i == 0 {
			secret.Annotations[SizeAnnotation] = strconv.Itoa(len(data))
			secret.Annotations[MD5Annotation] = sum
			secret.Annotations[StoredAtAnnotation] = time.Now().UTC().Format(time.RFC3339)
			if sealed {
				secret.Annotations[SealedSHA256Annotation] = Digest(data)
			}
		}
		if err := s.write(ctx, secret); err != nil {
			return fmt.Errorf("store chunk %d of %d of content %s: %w", i, n, digest, err)
		}
	}
	s.remember(digest, data)
	return nil
}

func (s *Store) chunk(digest string, i, n int, data []byte) *corev1.Secret {
	sum := sha256.Sum256(data)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ChunkName(digest, i),
			Namespace: s.Namespace,
			Labels:    map[string]string{ChunkLabel: "true"},
			Annotations: map[string]string{
				DigestAnnotation:      digest,
				IndexAnnotation:       fmt.Sprintf("%d/%d", i, n),
				ChunkSHA256Annotation: hex.EncodeToString(sum[:]),
			},
		},
		Type: ChunkType,
		Data: map[string][]byte{dataKey: data},
	}
}

// write creates a chunk, or replaces one left by an earlier attempt.
func (s *Store) write(ctx context.Context, secret *corev1.Secret) error {
	err := s.Client.Create(ctx, secret)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing := &corev1.Secret{}
	if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
		return err
	}
	secret.ResourceVersion = existing.ResourceVersion
	return s.Client.Update(ctx, secret)
}

// touch refreshes the stored-at time of content stored long ago, with the head's
// resourceVersion as a precondition, so the collector's conditional delete and this
// write never both succeed.
func (s *Store) touch(ctx context.Context, head *corev1.Secret) error {
	if stored, err := time.Parse(time.RFC3339, head.Annotations[StoredAtAnnotation]); err == nil && time.Since(stored) < s.Grace/2 {
		return nil
	}
	patch := client.MergeFromWithOptions(head.DeepCopy(), client.MergeFromWithOptimisticLock{})
	head.Annotations[StoredAtAnnotation] = time.Now().UTC().Format(time.RFC3339)
	if err := s.Client.Patch(ctx, head, patch); err != nil {
		return fmt.Errorf("refresh content %s: %w", head.Annotations[DigestAnnotation], err)
	}
	return nil
}

func parseIndex(v string) (i, n int, err error) {
	is, ns, ok := strings.Cut(v, "/")
	if !ok {
		return 0, 0, fmt.Errorf("index %q is not i/n", v)
	}
	if i, err = strconv.Atoi(is); err != nil {
		return 0, 0, err
	}
	if n, err = strconv.Atoi(ns); err != nil {
		return 0, 0, err
	}
	if i < 0 || n < 1 || i >= n || n > MaxSize/1024 {
		return 0, 0, fmt.Errorf("index %q is out of range", v)
	}
	return i, n, nil
}

// compressedBound is the most that size bytes take gzip-compressed: deflate's stored
// blocks add 5 bytes in 65,535, gzip 18 bytes of header and trailer; the bound is looser.
func compressedBound(size int64) int64 {
	return size + size/1024 + 1024
}

func compress(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, fmt.Errorf("compress content: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress content: %w", err)
	}
	return buf.Bytes(), nil
}

// decompress inflates at most size bytes: a chunk that inflates beyond what chunk 0
// recorded is refused rather than read without bound.
func decompress(compressed []byte, size int64) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("it inflates to %d bytes, not the %d recorded", len(data), size)
	}
	return data, nil
}

func (s *Store) remember(digest string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		limit := s.CacheBytes
		if limit <= 0 {
			limit = 64 << 20
		}
		s.cache = bytelru.New(limit)
	}
	s.cache.Add(digest, data)
}

func (s *Store) recall(digest string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		return nil, false
	}
	return s.cache.Get(digest)
}

func (s *Store) forget(digest string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache != nil {
		s.cache.Remove(digest)
	}
}
