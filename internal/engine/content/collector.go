package content

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	every(ctx, c.Interval, func(ctx context.Context) {
		deleted, err := c.Collect(ctx)
		if err != nil {
			c.Log.Error(err, "collect unused content")
		}
		for _, d := range deleted {
			c.Log.Info("deleted content that no VidraResource names", "digest", d)
		}
	})
	return nil
}

// every runs do every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, do func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			do(ctx)
		}
	}
}

// NamespacesCollector collects, in each of a set of namespaces that changes over time (the
// namespaces of pull clusters, where their agents read content), the content that the
// namespace's own objects no longer name, as a Collector does in one.
type NamespacesCollector struct {
	// Client deletes chunks; Reader reads them.
	Client client.Client
	Reader client.Reader
	// Namespaces returns the namespaces to collect in now.
	Namespaces func(ctx context.Context) ([]string, error)
	// InUse returns the digests something in namespace names.
	InUse func(namespace string) func(ctx context.Context) (map[string]bool, error)
	// Grace and Interval are a Collector's.
	Grace    time.Duration
	Interval time.Duration
	Log      logr.Logger
}

// NeedLeaderElection is true: one replica collects.
func (c *NamespacesCollector) NeedLeaderElection() bool { return true }

// Start collects every Interval until ctx ends.
func (c *NamespacesCollector) Start(ctx context.Context) error {
	every(ctx, c.Interval, func(ctx context.Context) {
		namespaces, err := c.Namespaces(ctx)
		if err != nil {
			c.Log.Error(err, "list the namespaces to collect content in")
			return
		}
		for _, ns := range namespaces {
			one := Collector{Store: &Store{Client: c.Client, Reader: c.Reader, Namespace: ns, Grace: c.Grace}, InUse: c.InUse(ns), Log: c.Log}
			deleted, err := one.Collect(ctx)
			if err != nil {
				c.Log.Error(err, "collect unused content", "namespace", ns)
			}
			for _, d := range deleted {
				c.Log.Info("deleted content that nothing names", "namespace", ns, "digest", d)
			}
		}
	})
	return nil
}

// Collect deletes unnamed content past its grace period, and chunks left without their
// chunk 0 (an upload that stopped half-way) once as old. It returns the digests deleted.
// Content an earlier version kept in ConfigMaps is collected alike, and what is left of
// it is moved into Secrets.
func (c *Collector) Collect(ctx context.Context) ([]string, error) {
	chunks, err := c.list(ctx, secretChunks)
	if err != nil {
		return nil, err
	}
	legacy, err := c.list(ctx, legacyChunks)
	if err != nil {
		return nil, err
	}
	// Nothing past its grace period, nothing to move: what is named is not read, since
	// reading it lists every VidraResource and revision of the fleet.
	if len(legacy) == 0 && !slices.ContainsFunc(slices.Collect(maps.Values(chunks)), c.due) {
		return nil, nil
	}
	// What is named is read after the chunks are listed: content named meanwhile is seen.
	inUse, err := c.InUse(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the content in use: %w", err)
	}
	deleted, errs := c.collect(ctx, chunks, inUse)
	deletedLegacy, legacyErrs := c.collect(ctx, legacy, inUse)
	for _, d := range deletedLegacy {
		delete(legacy, d)
	}
	moveErrs := c.moveLegacy(ctx, legacy)
	return append(deleted, deletedLegacy...), errors.Join(errors.Join(errs...), errors.Join(legacyErrs...), moveErrs)
}

// list lists the chunks of kind by digest (none of the earlier kind where ConfigMaps may
// not be listed).
func (c *Collector) list(ctx context.Context, kind chunkKind) (map[string][]*metav1.PartialObjectMetadata, error) {
	var chunks metav1.PartialObjectMetadataList
	chunks.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind) + "List"))
	err := c.Store.Reader.List(ctx, &chunks, client.InNamespace(c.Store.Namespace), client.HasLabels{ChunkLabel})
	if kind == legacyChunks && apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list content chunks (%ss): %w", kind, err)
	}
	byDigest := map[string][]*metav1.PartialObjectMetadata{}
	for i := range chunks.Items {
		m := &chunks.Items[i]
		byDigest[m.Annotations[DigestAnnotation]] = append(byDigest[m.Annotations[DigestAnnotation]], m)
	}
	return byDigest, nil
}

// collect deletes the unnamed content of byDigest past its grace period.
func (c *Collector) collect(ctx context.Context, byDigest map[string][]*metav1.PartialObjectMetadata, inUse map[string]bool) ([]string, []error) {
	s := c.Store
	var deleted []string
	var errs []error
	for _, digest := range slices.Sorted(maps.Keys(byDigest)) {
		if inUse[digest] {
			continue
		}
		parts := byDigest[digest]
		if !c.due(parts) {
			continue
		}
		head := headOf(parts)
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
		errs = append(errs, c.deleteParts(ctx, parts, head)...)
		s.forget(digest)
		deleted = append(deleted, digest)
	}
	return deleted, errs
}

// deleteParts deletes the chunks of parts but skip.
func (c *Collector) deleteParts(ctx context.Context, parts []*metav1.PartialObjectMetadata, skip *metav1.PartialObjectMetadata) []error {
	var errs []error
	for _, p := range parts {
		if p == skip {
			continue
		}
		if err := c.Store.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s: %w", p.Name, err))
		}
	}
	return errs
}

// moveLegacy stores again, in Secrets, the whole content that an earlier version kept in
// the ConfigMaps of byDigest, then deletes those: readers find the Secrets first. Content
// that does not read whole stays where it is, to be collected once unnamed.
func (c *Collector) moveLegacy(ctx context.Context, byDigest map[string][]*metav1.PartialObjectMetadata) error {
	s := c.Store
	var errs []error
	for _, digest := range slices.Sorted(maps.Keys(byDigest)) {
		parts := byDigest[digest]
		head := headOf(parts)
		if head == nil {
			continue
		}
		obj, err := s.readChunk(ctx, legacyChunks, digest, 0, 1)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		data, err := s.read(ctx, digest, legacyChunks, obj)
		if err == nil {
			_, err = s.Put(ctx, data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("move content %s from ConfigMaps to Secrets: %w", digest, err))
			continue
		}
		errs = append(errs, c.deleteParts(ctx, parts, nil)...)
		c.Log.Info("moved content from ConfigMaps to Secrets", "namespace", s.Namespace, "digest", digest)
	}
	return errors.Join(errs...)
}

// due reports whether the content of parts is past its grace period, and is deleted
// unless something names it: its head was stored that long ago, or, without a head, its
// newest chunk was.
func (c *Collector) due(parts []*metav1.PartialObjectMetadata) bool {
	if head := headOf(parts); head != nil {
		return c.expired(head.Annotations[StoredAtAnnotation], head.CreationTimestamp.Time)
	}
	return c.expired("", newest(parts))
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
		// Only digests are read: a fleet's VidraResources are not copied.
		if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
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

// NamedByBundles returns the digests that the VidraBundles of namespace name (a pull
// cluster's, whose agent reads the content there) in spec.content and spec.preview.
func NamedByBundles(reader client.Reader, namespace string) func(context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		var list vidrav1alpha1.VidraBundleList
		if err := reader.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("list the VidraBundles of %s: %w", namespace, err)
		}
		named := map[string]bool{}
		for _, b := range list.Items {
			if b.Spec.Content != nil {
				named[b.Spec.Content.Digest] = true
			}
			if p := b.Spec.Preview; p != nil && p.Content != nil {
				named[p.Content.Digest] = true
			}
		}
		return named, nil
	}
}

// NamedBySyncs returns the digests that syncs of every kind keep: the newest content of
// each bundle and that of the last revision that completed, for their rollouts, and the
// bundle a GitSync or OCISync last fetched, so an unchanged revision is not fetched again
// (a HelmSync's renderings are among its bundles).
func NamedBySyncs(reader client.Reader) func(context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		named := map[string]bool{}
		for _, kind := range vidrav1alpha1.SyncKinds() {
			list := kind.NewList()
			if err := reader.List(ctx, list); err != nil {
				return nil, fmt.Errorf("list %s: %w", kind.Resource, err)
			}
			for _, sync := range list.Syncs() {
				for _, a := range sync.Bundles() {
					for _, d := range []string{a.Digest, a.StableDigest} {
						if d != "" {
							named[d] = true
						}
					}
				}
				if fetched := sync.Fetched(); fetched != nil && fetched.Digest != "" {
					named[fetched.Digest] = true
				}
				if gs, ok := sync.(*vidrav1alpha1.GitSync); ok {
					for _, p := range gs.Status.Previews {
						if p.Digest != "" {
							named[p.Digest] = true // the clusters' previews, for kubectl vidra preview
						}
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
