// Package content is Vidra's content store: manifest bundles too large to sit inline in a
// VidraResource are kept on the hub, gzip-compressed, addressed by the sha256 of their
// uncompressed bytes, and split into ConfigMaps small enough for the API server and etcd.
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

	"github.com/vidra-operator/vidra/internal/bytelru"
)

// Labels and annotations of the chunk ConfigMaps.
const (
	// ChunkLabel marks a ConfigMap as a chunk of stored content.
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

	// dataKey holds a chunk's bytes in the ConfigMap's binaryData.
	dataKey = "chunk"
)

// DefaultChunkSize is the largest compressed chunk, in bytes: a ConfigMap holds at most
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

// Store keeps content in ConfigMaps of one namespace on the hub.
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
	if len(data) > MaxSize {
		return "", fmt.Errorf("content of %d bytes is over the %d bytes the store takes", len(data), MaxSize)
	}
	digest := Digest(data)
	head := &corev1.ConfigMap{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: ChunkName(digest, 0)}, head)
	switch {
	case err == nil:
		// Stored and whole, as read now (not as remembered): only refreshed. Damaged or
		// incomplete: written again below.
		if _, err := s.read(ctx, digest, head); err == nil {
			return digest, s.touch(ctx, head)
		}
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("look up content %s: %w", digest, err)
	}

	compressed, err := compress(data)
	if err != nil {
		return "", err
	}
	size := s.ChunkSize
	if size <= 0 {
		size = DefaultChunkSize
	}
	n := (len(compressed) + size - 1) / size
	if n == 0 {
		n = 1
	}
	sum := MD5(data)
	for i := n - 1; i >= 0; i-- {
		chunk := compressed[min(i*size, len(compressed)):min((i+1)*size, len(compressed))]
		cm := s.chunk(digest, i, n, chunk)
		if i == 0 {
			cm.Annotations[SizeAnnotation] = strconv.Itoa(len(data))
			cm.Annotations[MD5Annotation] = sum
			cm.Annotations[StoredAtAnnotation] = time.Now().UTC().Format(time.RFC3339)
		}
		if err := s.write(ctx, cm); err != nil {
			return "", fmt.Errorf("store chunk %d of %d of content %s: %w", i, n, digest, err)
		}
	}
	s.remember(digest, data)
	return digest, nil
}

func (s *Store) chunk(digest string, i, n int, data []byte) *corev1.ConfigMap {
	sum := sha256.Sum256(data)
	return &corev1.ConfigMap{
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
		BinaryData: map[string][]byte{dataKey: data},
	}
}

// write creates a chunk, or replaces one left by an earlier attempt.
func (s *Store) write(ctx context.Context, cm *corev1.ConfigMap) error {
	err := s.Client.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(cm), existing); err != nil {
		return err
	}
	cm.ResourceVersion = existing.ResourceVersion
	return s.Client.Update(ctx, cm)
}

// touch refreshes the stored-at time of content stored long ago, with the head's
// resourceVersion as a precondition, so the collector's conditional delete and this
// write never both succeed.
func (s *Store) touch(ctx context.Context, head *corev1.ConfigMap) error {
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

// Stat reads what chunk 0 records of the content, without its chunks.
func (s *Store) Stat(ctx context.Context, digest string) (Info, error) {
	head, err := s.head(ctx, digest)
	if err != nil {
		return Info{}, err
	}
	return s.verifyHead(head, digest)
}

// head reads chunk 0 of the content.
func (s *Store) head(ctx context.Context, digest string) (*corev1.ConfigMap, error) {
	if !digestPattern.MatchString(digest) {
		return nil, fmt.Errorf("%q is not a content digest (sha256:<64 hex digits>): %w", digest, ErrUnavailable)
	}
	head := &corev1.ConfigMap{}
	name := ChunkName(digest, 0)
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, head); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("content %s is not stored (no ConfigMap %s/%s): %w", digest, s.Namespace, name, ErrUnavailable)
		}
		return nil, fmt.Errorf("read content %s: %w", digest, err)
	}
	return head, nil
}

// verifyHead checks chunk 0's records.
func (s *Store) verifyHead(head *corev1.ConfigMap, digest string) (Info, error) {
	info := Info{Digest: digest, MD5: head.Annotations[MD5Annotation]}
	if head.Annotations[DigestAnnotation] != digest {
		return info, fmt.Errorf("chunk 0 of content %s (ConfigMap %s/%s) is of content %q: %w", digest, s.Namespace, head.Name, head.Annotations[DigestAnnotation], ErrUnavailable)
	}
	i, n, err := parseIndex(head.Annotations[IndexAnnotation])
	if err != nil || i != 0 {
		return info, fmt.Errorf("chunk 0 of content %s (ConfigMap %s/%s) has a bad index %q: %w", digest, s.Namespace, head.Name, head.Annotations[IndexAnnotation], ErrUnavailable)
	}
	info.Chunks = n
	info.Size, err = strconv.ParseInt(head.Annotations[SizeAnnotation], 10, 64)
	if err != nil || info.Size < 0 || info.Size > MaxSize {
		return info, fmt.Errorf("chunk 0 of content %s (ConfigMap %s/%s) has a bad size %q: %w", digest, s.Namespace, head.Name, head.Annotations[SizeAnnotation], ErrUnavailable)
	}
	return info, nil
}

// Get returns the content with digest after checking every chunk against its recorded
// sha256 and the whole against the digest. Errors that say the content cannot be read as
// stored wrap ErrUnavailable and name the chunk.
func (s *Store) Get(ctx context.Context, digest string) ([]byte, error) {
	if data, ok := s.recall(digest); ok {
		return data, nil
	}
	data, err := s.read(ctx, digest, nil)
	if err != nil {
		return nil, err
	}
	s.remember(digest, data)
	return data, nil
}

// read reads and verifies the content from the API server, from its chunk 0 when the
// caller has it already.
func (s *Store) read(ctx context.Context, digest string, head *corev1.ConfigMap) ([]byte, error) {
	if head == nil {
		var err error
		if head, err = s.head(ctx, digest); err != nil {
			return nil, err
		}
	}
	info, err := s.verifyHead(head, digest)
	if err != nil {
		return nil, err
	}
	// The chunks are joined only as far as the content chunk 0 records can take
	// compressed: chunks that hold more are refused before they are held, not after.
	bound := compressedBound(info.Size)
	var compressed bytes.Buffer
	for i := range info.Chunks {
		cm := head
		if i > 0 {
			if cm, err = s.readChunk(ctx, digest, i, info.Chunks); err != nil {
				return nil, err
			}
		}
		chunk, err := s.chunkData(cm, digest, i, info.Chunks)
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
	if got := Digest(data); got != digest {
		return nil, fmt.Errorf("content %s reads back as %s: %w", digest, got, ErrUnavailable)
	}
	return data, nil
}

// readChunk reads chunk i of n of the content.
func (s *Store) readChunk(ctx context.Context, digest string, i, n int) (*corev1.ConfigMap, error) {
	name := ChunkName(digest, i)
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("chunk %d of %d of content %s is missing (ConfigMap %s/%s): %w", i, n, digest, s.Namespace, name, ErrUnavailable)
		}
		return nil, fmt.Errorf("read chunk %d of content %s: %w", i, digest, err)
	}
	return cm, nil
}

// chunkData is the bytes of chunk i of n, checked against what the chunk records.
func (s *Store) chunkData(cm *corev1.ConfigMap, digest string, i, n int) ([]byte, error) {
	data := cm.BinaryData[dataKey]
	sum := sha256.Sum256(data)
	if cm.Annotations[DigestAnnotation] != digest || cm.Annotations[IndexAnnotation] != fmt.Sprintf("%d/%d", i, n) ||
		cm.Annotations[ChunkSHA256Annotation] != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("chunk %d of %d of content %s is corrupted (ConfigMap %s/%s does not match its recorded sha256, digest or index): %w", i, n, digest, s.Namespace, cm.Name, ErrUnavailable)
	}
	return data, nil
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
