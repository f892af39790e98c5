package content

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Collector deletes stored content that nothing names any more, once it was last stored
// longer ago than the store's grace period (an upload waits that long for the
// VidraResource that will name it).
type Collector struct {
	Store *Store
	// InUse returns the digests that something still names.
	InUse func(ctx context.Context) (map[string]bool, error)
	// Interval between collections.
	Interval time.Duration
	Log      logr.Logger
}

// NeedLeaderElection is true: one replica collects.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start collects every Interval until ctx ends.
func (c *Collector) Start(ctx context.Context) error {
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			deleted, err := c.Collect(ctx)
			if err != nil {
				c.Log.Error(err, "collect unused content")
			}
			for _, d := range deleted {
				c.Log.Info("deleted content that no VidraResource names", "digest", d)
			}
		}
	}
}

// Collect deletes unnamed content past its grace period, and chunks left without their
// chunk 0 (an upload that stopped half-way) once as old. It returns the digests deleted.
func (c *Collector) Collect(ctx context.Context) ([]string, error) {
	s := c.Store
	var chunks metav1.PartialObjectMetadataList
	chunks.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.Reader.List(ctx, &chunks, client.InNamespace(s.Namespace), client.HasLabels{ChunkLabel}); err != nil {
		return nil, fmt.Errorf("list content chunks: %w", err)
	}
	// What is named is read after the chunks are listed: content named meanwhile is seen.
	inUse, err := c.InUse(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the content in use: %w", err)
	}
	byDigest := map[string][]*metav1.PartialObjectMetadata{}
	for i := range chunks.Items {
		m := &chunks.Items[i]
		byDigest[m.Annotations[DigestAnnotation]] = append(byDigest[m.Annotations[DigestAnnotation]], m)
	}
	digests := make([]string, 0, len(byDigest))
	for d := range byDigest {
		digests = append(digests, d)
	}
	sort.Strings(digests)

	var deleted []string
	var errs []error
	for _, digest := range digests {
		if inUse[digest] {
			continue
		}
		parts := byDigest[digest]
		head := headOf(parts)
		if head != nil && !c.expired(head.Annotations[StoredAtAnnotation], head.CreationTimestamp.Time) {
			continue
		}
		if head == nil && !c.expired("", newest(parts)) {
			continue
		}
		// The head goes first, conditionally: a Put that refreshed it meanwhile wins, and
		// with it gone the content no longer exists for readers.
		if head != nil {
			err := s.Client.Delete(ctx, head, client.Preconditions{UID: &head.UID, ResourceVersion: &head.ResourceVersion})
			if apierrors.IsConflict(err) {
				continue
			}
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s: %w", head.Name, err))
				continue
			}
		}
		for _, p := range parts {
			if p == head {
				continue
			}
			if err := s.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s: %w", p.Name, err))
			}
		}
		s.forget(digest)
		deleted = append(deleted, digest)
	}
	return deleted, errors.Join(errs...)
}

func (c *Collector) expired(storedAt string, created time.Time) bool {
	at := created
	if t, err := time.Parse(time.RFC3339, storedAt); err == nil && t.After(at) {
		at = t
	}
	return time.Since(at) >= c.Store.Grace
}

func headOf(parts []*metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	for _, p := range parts {
		if i, _, err := parseIndex(p.Annotations[IndexAnnotation]); err == nil && i == 0 && p.Name == ChunkName(p.Annotations[DigestAnnotation], 0) {
			return p
		}
	}
	return nil
}

func newest(parts []*metav1.PartialObjectMetadata) time.Time {
	var t time.Time
	for _, p := range parts {
		if p.CreationTimestamp.After(t) {
			t = p.CreationTimestamp.Time
		}
	}
	return t
}

// NamedByVidraResources returns the digests that VidraResources name in spec.content and
// spec.preview.
func NamedByVidraResources(reader client.Reader) func(context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		var list vidrav1alpha1.VidraResourceList
		if err := reader.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("list VidraResources: %w", err)
		}
		named := map[string]bool{}
		for _, vr := range list.Items {
			if vr.Spec.Content != nil {
				named[vr.Spec.Content.Digest] = true
			}
			if p := vr.Spec.Preview; p != nil && p.Content != nil {
				named[p.Content.Digest] = true
			}
		}
		return named, nil
	}
}

// NamedByInfrahubSyncs returns the digests that InfrahubSyncs keep for their rollouts: the
// newest content of each artifact, and that of the last revision that completed.
func NamedByInfrahubSyncs(reader client.Reader) func(context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		var list vidrav1alpha1.InfrahubSyncList
		if err := reader.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("list InfrahubSyncs: %w", err)
		}
		named := map[string]bool{}
		for _, ihs := range list.Items {
			for _, a := range ihs.Status.Artifacts {
				for _, d := range []string{a.Digest, a.StableDigest} {
					if d != "" {
						named[d] = true
					}
				}
			}
		}
		return named, nil
	}
}

// NamedByAny returns the digests any of named returns.
func NamedByAny(named ...func(context.Context) (map[string]bool, error)) func(context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		all := map[string]bool{}
		for _, n := range named {
			digests, err := n(ctx)
			if err != nil {
				return nil, err
			}
			maps.Copy(all, digests)
		}
		return all, nil
	}
}
