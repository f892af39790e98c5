package vidraresource

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/manifest"
)

// readBundle reads the bundle, verifying stored content whole, and decodes it whole:
// nothing is applied of a bundle that does not.
func (r *Reconciler) readBundle(ctx context.Context, d *delivery) *outcome {
	vr := d.vr
	data, err := r.bundle(ctx, vr)
	switch {
	case errors.As(err, new(*contentRefusedError)):
		markStalled(vr, vidrav1alpha1.ReasonContentRefused, err.Error())
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonContentRefused, err.Error())
		return stop(ctrl.Result{RequeueAfter: deliverCheckTTL}, nil) // a right granted is seen then
	case errors.Is(err, content.ErrUnavailable):
		markStalled(vr, vidrav1alpha1.ReasonContentUnavailable, err.Error())
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonContentUnavailable, err.Error())
		return stop(ctrl.Result{RequeueAfter: contentRetry}, nil) // it may be stored yet
	case err != nil:
		markNotReady(vr, vidrav1alpha1.ReasonContentUnavailable, err.Error())
		return stop(ctrl.Result{}, err)
	}
	objects, err := manifest.Decode(data)
	if err != nil {
		markStalled(vr, vidrav1alpha1.ReasonInvalidManifest, "manifest: "+err.Error())
		r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonInvalidManifest, err.Error())
		return stop(ctrl.Result{}, nil) // terminal until the spec changes
	}
	d.data, d.objects = data, objects
	return nil
}

// contentRetry is how soon a VidraResource whose stored content cannot be read looks again.
const contentRetry = 10 * time.Second

// bundle is the VidraResource's manifest: inline, or read from the content store.
func (r *Reconciler) bundle(ctx context.Context, vr *vidrav1alpha1.VidraResource) ([]byte, error) {
	return r.contentOf(ctx, vr, "spec.content", vr.Spec.Manifest, vr.Spec.Content)
}

// contentOf is a bundle given inline (manifest) or by reference to the content store, as
// field of the VidraResource gives it; stored content only when it is the VidraResource's
// to deliver.
func (r *Reconciler) contentOf(ctx context.Context, vr *vidrav1alpha1.VidraResource, field, manifest string, ref *vidrav1alpha1.ContentReference) ([]byte, error) {
	if ref == nil {
		return []byte(manifest), nil
	}
	if r.Content == nil {
		return nil, fmt.Errorf("%s names %s, and this operator has no content store: %w", field, ref.Digest, content.ErrUnavailable)
	}
	if err := r.contentRefusal(ctx, vr, field, ref.Digest); err != nil {
		return nil, err
	}
	data, err := r.Content.Get(ctx, ref.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return data, nil
}
