// Package pullagent is the agent of a pull cluster: it keeps on its member a copy of
// every bundle the hub publishes for the cluster, as a VidraResource of the member, which
// the member's own VidraResource controller applies and keeps applied (drift is repaired
// from the copy, hub or no hub), and it writes back to the hub how each copy stands.
package pullagent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sevents "k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// Reconciler reconciles one bundle name: the hub's VidraBundle of that name and the
// member's copy of it.
type Reconciler struct {
	// Cluster is the cluster's name on the hub, which labels every copy.
	Cluster string
	// Bundles reads the cluster's VidraBundles (the hub cache of its namespace), and Hub
	// writes their status.
	Bundles   client.Reader
	Hub       client.Client
	Namespace string
	// HubContent reads the content the bundles name from the cluster's namespace on the
	// hub; Content keeps it on the member.
	HubContent *content.Store
	Content    *content.Store
	// Member reads and writes the copies (VidraResources on the member).
	Member client.Client
	// Recorder records Events on the copies.
	Recorder k8sevents.EventRecorder

	// unpublished holds the copies already said to be no longer published, by UID.
	unpublished sync.Map
}

// reasonNotPublished: the hub no longer publishes a bundle it never withdrew.
const reasonNotPublished = "NotPublished"

// contentRetry is how soon a bundle whose content could not be fetched is looked at again.
const contentRetry = 10 * time.Second

// Reconcile brings the member's copy in line with the hub's bundle, and the bundle's
// status in line with the copy's.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	name := req.Name
	bundle := &vidrav1alpha1.VidraBundle{}
	err := r.Bundles.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, bundle)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get VidraBundle %s/%s: %w", r.Namespace, name, err)
	}
	published := err == nil
	local := &vidrav1alpha1.VidraResource{}
	err = r.Member.Get(ctx, client.ObjectKey{Name: name}, local)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get VidraResource %s: %w", name, err)
	}
	copied := err == nil && local.Labels[vidrav1alpha1.PulledFromLabel] == r.Cluster
	switch {
	case !published:
		// Only a bundle seen being deleted releases its copy: a bundle merely absent (a hub
		// rebuilt or restored, finalizers removed by hand) must not prune a member.
		if copied && local.DeletionTimestamp.IsZero() {
			if _, said := r.unpublished.LoadOrStore(local.UID, true); !said {
				r.Recorder.Eventf(local, nil, corev1.EventTypeWarning, reasonNotPublished, "Keep",
					"the hub no longer publishes bundle %s/%s, yet never withdrew it: the copy is kept as it is; delete it to release what it delivered", r.Namespace, name)
			}
		}
		return ctrl.Result{}, nil
	case !bundle.DeletionTimestamp.IsZero():
		return ctrl.Result{}, r.release(ctx, bundle, local, copied)
	case err == nil && !copied:
		// A VidraResource of the member's own, not a copy: left alone, and said so.
		return ctrl.Result{}, r.refuse(ctx, bundle, vidrav1alpha1.ReasonConflict, fmt.Sprintf("the member already has a VidraResource %s that is not a copy of the hub's (no label %s=%s): it is left alone, and this bundle is not delivered", name, vidrav1alpha1.PulledFromLabel, r.Cluster))
	}
	if err := r.fetchContent(ctx, bundle); err != nil {
		if errors.Is(err, content.ErrUnavailable) {
			return ctrl.Result{RequeueAfter: contentRetry}, r.refuse(ctx, bundle, vidrav1alpha1.ReasonContentUnavailable, "the content the bundle names cannot be fetched from the hub: "+err.Error())
		}
		return ctrl.Result{}, err
	}
	if local, err = r.writeCopy(ctx, bundle, local, copied); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.report(ctx, bundle, local)
}

// release deletes the copy of a bundle the hub withdrew, which releases every object of
// it on the member (the copy's finalizer), and then says so on the bundle, which lets
// the hub's VidraResource go.
func (r *Reconciler) release(ctx context.Context, bundle *vidrav1alpha1.VidraBundle, local *vidrav1alpha1.VidraResource, copied bool) error {
	if copied {
		if bundle.Annotations[vidrav1alpha1.WithdrawAnnotation] == vidrav1alpha1.WithdrawHandOver {
			// The hub delivers there itself now, in the same owners' names: the copy goes
			// without releasing anything.
			handed := local.DeepCopy()
			if controllerutil.RemoveFinalizer(handed, vidrav1alpha1.VidraResourceFinalizer) {
				if err := r.Member.Patch(ctx, handed, client.MergeFrom(local)); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("hand VidraResource %s over: %w", local.Name, err)
				}
			}
		}
		if local.DeletionTimestamp.IsZero() {
			if err := r.Member.Delete(ctx, local, client.Preconditions{UID: &local.UID}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete VidraResource %s: %w", local.Name, err)
			}
		}
		return r.report(ctx, bundle, local)
	}
	if bundle.Status.Released {
		return nil
	}
	updated := bundle.DeepCopy()
	updated.Status.Released = true
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: vidrav1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: vidrav1alpha1.ReasonDeleting, Message: "released by the agent: every object of it is released on the member"})
	if err := r.Hub.Status().Update(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("report VidraBundle %s/%s released: %w", bundle.Namespace, bundle.Name, err)
	}
	return nil
}

// fetchContent copies the content the bundle names from the hub to the member's store,
// where its copy reads it, hub or no hub.
func (r *Reconciler) fetchContent(ctx context.Context, bundle *vidrav1alpha1.VidraBundle) error {
	refs := []*vidrav1alpha1.ContentReference{bundle.Spec.Content}
	if bundle.Spec.Preview != nil {
		refs = append(refs, bundle.Spec.Preview.Content)
	}
	for _, ref := range refs {
		if ref == nil {
			continue
		}
		if _, err := r.Content.Stat(ctx, ref.Digest); err == nil {
			continue
		}
		data, err := r.HubContent.Get(ctx, ref.Digest)
		if err != nil {
			return fmt.Errorf("fetch content %s: %w", ref.Digest, err)
		}
		if err := r.Content.PutAs(ctx, ref.Digest, data); err != nil {
			return fmt.Errorf("keep content %s on the member: %w", ref.Digest, err)
		}
	}
	return nil
}

// writeCopy makes the member's copy say what the bundle says.
func (r *Reconciler) writeCopy(ctx context.Context, bundle *vidrav1alpha1.VidraBundle, local *vidrav1alpha1.VidraResource, copied bool) (*vidrav1alpha1.VidraResource, error) {
	labels := maps.Clone(bundle.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[vidrav1alpha1.PulledFromLabel] = r.Cluster
	if !copied {
		local = &vidrav1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Name: bundle.Name, Labels: labels, Annotations: maps.Clone(bundle.Annotations)},
			Spec:       bundle.Spec,
		}
		if err := r.Member.Create(ctx, local); err != nil {
			return nil, fmt.Errorf("create VidraResource %s: %w", bundle.Name, err)
		}
		return local, nil
	}
	if apiequality.Semantic.DeepEqual(local.Spec, bundle.Spec) && maps.Equal(local.Labels, labels) && maps.Equal(local.Annotations, bundle.Annotations) {
		return local, nil
	}
	updated := local.DeepCopy()
	updated.Spec, updated.Labels, updated.Annotations = bundle.Spec, labels, maps.Clone(bundle.Annotations)
	if err := r.Member.Update(ctx, updated); err != nil {
		return nil, fmt.Errorf("update VidraResource %s: %w", bundle.Name, err)
	}
	return updated, nil
}

// report writes the copy's status to the bundle, once the copy's controller reported on
// the copy as it is: the generations are the hub's.
func (r *Reconciler) report(ctx context.Context, bundle *vidrav1alpha1.VidraBundle, local *vidrav1alpha1.VidraResource) error {
	hubGeneration, err := strconv.ParseInt(local.Annotations[vidrav1alpha1.HubGenerationAnnotation], 10, 64)
	if err != nil || local.Status.ObservedGeneration != local.Generation {
		return nil // the copy's own controller has not looked at it yet
	}
	status := vidrav1alpha1.VidraBundleStatus{VidraResourceStatus: *local.Status.DeepCopy(), HubGeneration: hubGeneration}
	// Generations are the hub's: the copy's current one is the hub's, and an older one of
	// the copy's means nothing on the hub (0), lest it pass for a current one there.
	hubOf := func(g int64) int64 {
		if g == local.Generation {
			return hubGeneration
		}
		return 0
	}
	status.ObservedGeneration = hubGeneration
	for i := range status.Conditions {
		status.Conditions[i].ObservedGeneration = hubOf(status.Conditions[i].ObservedGeneration)
	}
	if status.Preview != nil {
		status.Preview.ObservedGeneration = hubOf(status.Preview.ObservedGeneration)
	}
	if apiequality.Semantic.DeepEqual(status, bundle.Status) {
		return nil
	}
	updated := bundle.DeepCopy()
	updated.Status = status
	if err := r.Hub.Status().Update(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("report VidraBundle %s/%s: %w", bundle.Namespace, bundle.Name, err)
	}
	return nil
}

// refuse reports a bundle the agent does not deliver, and why: Stalled until the bundle
// or the member changes.
func (r *Reconciler) refuse(ctx context.Context, bundle *vidrav1alpha1.VidraBundle, reason, why string) error {
	hubGeneration, _ := strconv.ParseInt(bundle.Annotations[vidrav1alpha1.HubGenerationAnnotation], 10, 64)
	updated := bundle.DeepCopy()
	st := &updated.Status
	st.HubGeneration, st.ObservedGeneration = hubGeneration, hubGeneration
	st.DeployState, st.LastError = vidrav1alpha1.StateFailed, conditions.Bounded(why)
	for t, status := range map[string]metav1.ConditionStatus{vidrav1alpha1.ConditionReady: metav1.ConditionFalse, vidrav1alpha1.ConditionStalled: metav1.ConditionTrue} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason,
			Message: conditions.Bounded(why), ObservedGeneration: hubGeneration})
	}
	if apiequality.Semantic.DeepEqual(updated.Status, bundle.Status) {
		return nil
	}
	if err := r.Hub.Status().Update(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("report VidraBundle %s/%s refused: %w", bundle.Namespace, bundle.Name, err)
	}
	return nil
}
