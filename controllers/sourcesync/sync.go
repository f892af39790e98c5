package sourcesync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/manifest"
	"github.com/vidra-operator/vidra/internal/fanout"
)

// Read asks the source which revision the sync names, and gets its bundle: from the
// content store when it was fetched before, else fetched and built once. When the source
// fails, the bundle fetched before is what the sync delivers still.
func (k *Kind) Read(ctx context.Context, obj syncs.Object) (syncs.Read, error) {
	o := obj.(Object)
	if r := k.renderer(o); r != nil {
		return k.readRendered(ctx, o, r)
	}
	want, err := k.fetch(ctx, o)
	if err != nil {
		var ok bool
		if want, ok = k.delivered(ctx, o); !ok {
			return nil, err
		}
	}
	return &bundleRead{stored: stored{store: k.Content}, obj: o, kind: k.Sync, want: want}, err
}

// bundleRead delivers one bundle to every destination.
type bundleRead struct {
	stored
	obj  Object
	kind vidrav1alpha1.SyncKind
	want wanted
}

// Items is the one bundle. Its ID is the kind's name: it names the VidraResources, so a
// GitSync and an OCISync of one name never make the same one.
func (b *bundleRead) Items(context.Context, *fanout.Delivery, []fanout.Target, map[string]vidrav1alpha1.BundleStatus) []fanout.Item {
	return []fanout.Item{{ID: strings.ToLower(b.kind.Kind), Name: b.obj.GetName(), Revision: b.want.revision, Checksum: b.want.checksum, Digest: b.want.digest}}
}

// Record writes the delivery to status.bundles and status.rollout.
func (b *bundleRead) Record(bundles []vidrav1alpha1.BundleStatus, rollout *vidrav1alpha1.RolloutStatus, _ map[string]vidrav1alpha1.BundleStatus) (string, error) {
	record(b.obj, bundles, rollout)
	return b.want.revision, nil
}

// record writes a delivery to the sync's status.
func record(obj Object, bundles []vidrav1alpha1.BundleStatus, rollout *vidrav1alpha1.RolloutStatus) {
	status := obj.SourceStatus()
	status.Bundles = bundles
	if rollout != nil {
		status.Rollout = rollout
	}
}

// wanted is the bundle a sync delivers: its digest and MD5 in the content store, and the
// revision it was built from.
type wanted struct {
	digest, checksum, revision string
}

// fetch asks the source for the revision the sync names and returns its bundle, fetched
// only when new, recording it in status.source.
func (k *Kind) fetch(ctx context.Context, obj Object) (wanted, error) {
	rev, err := k.Source.Resolve(ctx, obj)
	if err != nil {
		return wanted{}, err
	}
	status := obj.SourceStatus()
	now := metav1.NewTime(k.now())
	status.LastSyncTime = &now
	digest, checksum, fetched, err := k.bundle(ctx, obj, rev)
	if err != nil {
		return wanted{}, err
	}
	if fetched || status.Source == nil || status.Source.Key != rev.Key {
		status.Source = &vidrav1alpha1.SourceStatus{FetchedAt: &now}
	}
	status.Source.Revision, status.Source.Digest, status.Source.Key = rev.Name, digest, rev.Key
	return wanted{digest: digest, checksum: checksum, revision: rev.Name}, nil
}

// delivered is the bundle the sync fetched last, when it is still stored.
func (k *Kind) delivered(ctx context.Context, obj Object) (wanted, bool) {
	src := obj.SourceStatus().Source
	if src == nil || src.Digest == "" {
		return wanted{}, false
	}
	info, err := k.Content.Stat(ctx, src.Digest)
	if err != nil {
		return wanted{}, false
	}
	return wanted{digest: src.Digest, checksum: info.MD5, revision: src.Revision}, true
}

// bundle returns the digest and MD5 of rev's bundle in the content store, fetching and
// building it only when no earlier reconcile of any sync did (fetched says it did now).
func (k *Kind) bundle(ctx context.Context, obj Object, rev Revision) (digest, checksum string, fetched bool, err error) {
	known := ""
	// A sync's spec.postBuild makes its bundle a template, checked as one (its builds for
	// each cluster are checked in full); a template is remembered apart from a bundle.
	decode, memo := manifest.Decode, rev.Key+"\x00"+rev.Credentials
	if _, template := k.renderer(obj).(*substitution); template {
		decode, memo = manifest.DecodeTemplate, memo+"\x00template"
	}
	if src := obj.SourceStatus().Source; src != nil && src.Key == rev.Key {
		known = src.Digest
	} else if b, ok := k.builds().Get(memo); ok {
		if f, failed := b.(failedBuild); failed {
			if f.until.IsZero() || k.now().Before(f.until) {
				return "", "", false, f.err
			}
			k.builds().Remove(memo)
		} else {
			known = b.(string)
		}
	}
	if known != "" {
		info, err := k.Content.Stat(ctx, known)
		if err == nil {
			return known, info.MD5, false, nil
		}
		if !errors.Is(err, content.ErrUnavailable) {
			return "", "", false, &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: fmt.Errorf("read bundle %s: %w", known, err)}
		}
		// Collected or damaged since: fetched again.
	}
	data, err := k.Source.Bundle(ctx, obj, rev)
	k.Metrics.observeFetch(k.Sync.Kind, err)
	if err == nil {
		if _, decodeErr := decode(data); decodeErr != nil {
			err = &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: fmt.Errorf("%s: the bundle is not Kubernetes manifests: %w", rev.Name, decodeErr)}
		}
	}
	if err != nil {
		if f, ok := k.remembered(err); ok {
			k.builds().Add(memo, f)
		}
		return "", "", false, err
	}
	if digest, err = k.Content.Put(ctx, data); err != nil {
		return "", "", false, &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: fmt.Errorf("store bundle of %s: %w", rev.Name, err)}
	}
	k.builds().Add(memo, digest)
	return digest, content.MD5(data), true, nil
}

// failedBuild is a revision that could not be built, remembered so that it is not
// fetched again to fail the same way: until a time, or for good (zero).
type failedBuild struct {
	err   error
	until time.Time
}

// refNotFoundFor is how long a commit a checkout did not find is not looked for again: it
// may be pushed later.
const refNotFoundFor = 10 * time.Minute

// remembered says how long a failure to build a revision stands: for good when it is the
// revision's own (the same revision and path build the same way), for a while when the
// commit named was not found or the failure says how long, not at all when it may be the
// network's, a Secret's or the machine's (Transient).
func (k *Kind) remembered(err error) (failedBuild, bool) {
	var f *syncs.Failure
	switch {
	case !errors.As(err, &f), f.Transient:
		return failedBuild{}, false
	case f.RetryAfter > 0:
		return failedBuild{err: err, until: k.now().Add(f.RetryAfter)}, true
	case f.Reason == vidrav1alpha1.ReasonBuildFailed, f.Reason == vidrav1alpha1.ReasonLimitExceeded:
		return failedBuild{err: err}, true
	case f.Reason == vidrav1alpha1.ReasonRefNotFound:
		return failedBuild{err: err, until: k.now().Add(refNotFoundFor)}, true
	}
	return failedBuild{}, false
}
