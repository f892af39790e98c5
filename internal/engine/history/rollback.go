package history

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// Restore writes revision r's content back to the VidraResource, which then applies it as
// any change. One a sync (of any kind) made is pinned there: the sync leaves its content
// alone until its rollout is resumed.
func Restore(ctx context.Context, c client.Client, vr *vidrav1alpha1.VidraResource, r Revision) error {
	// Optimistic, so a change written meanwhile (by its sync, say) is read and kept
	// rather than overwritten; then tried again on the fresh object.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vr), vr); err != nil {
			return err
		}
		base := vr.DeepCopy()
		vr.Spec.Manifest, vr.Spec.Content = r.Body.Manifest, r.Body.Content
		if _, sync := vidrav1alpha1.SyncOf(vr.Labels); sync != "" {
			if vr.Annotations == nil {
				vr.Annotations = map[string]string{}
			}
			vr.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] = strconv.FormatInt(r.Number, 10)
			// What it delivers now is that revision's, for the sync and the history.
			setOrDelete(vr.Annotations, vidrav1alpha1.SyncRevisionAnnotation, r.SyncRevision)
			setOrDelete(vr.Annotations, vidrav1alpha1.BundleChecksumAnnotation, r.Checksum)
			if r.SourceRevision != "" {
				// The commit or tag it delivers now, as a sync of a Git or OCI source
				// names its bundle.
				vr.Annotations[vidrav1alpha1.BundleRevisionAnnotation] = r.SourceRevision
			}
		}
		return c.Patch(ctx, vr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("roll %s back to revision %d: %w", vr.Name, r.Number, err)
	}
	return nil
}

func setOrDelete(m map[string]string, key, value string) {
	if value == "" {
		delete(m, key)
		return
	}
	m[key] = value
}
