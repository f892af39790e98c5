package vidraresource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/history"
	"github.com/vidra-operator/vidra/internal/fleet/destination"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/runtime/conditions"
)

// A pull cluster's agent applies its bundles itself: the hub holds no credential for it.
// For such a cluster the hub publishes each VidraResource as a VidraBundle in the
// cluster's namespace (with the content it names), which the agent alone may read, and
// shows the agent's report of it as the VidraResource's status.

// pullCluster returns the pull cluster the VidraResource delivers to, if it does.
func (r *Reconciler) pullCluster(ctx context.Context, vr *vidrav1alpha1.VidraResource) (string, bool) {
	name, err := r.Resolver.Resolve(vr.Spec.Destination)
	if err != nil || name == destination.LocalCluster {
		return "", false
	}
	vc := &vidrav1alpha1.VidraCluster{}
	if err := r.Hub.Get(ctx, client.ObjectKey{Name: string(name)}, vc); err != nil {
		return "", false
	}
	return string(name), vc.Status.Mode == vidrav1alpha1.ClusterModePull
}

// reconcilePull delivers to a pull cluster: the bundle, read and decoded (a bundle that
// does not is reported here, as for any cluster), is recorded in the hub's history and
// published to the cluster's agent, suspended or not, and the agent's last report of it
// is the status.
func (r *Reconciler) reconcilePull(ctx context.Context, vr *vidrav1alpha1.VidraResource, cluster string) (ctrl.Result, error) {
	d := &delivery{vr: vr, previousResult: history.CurrentResult(vr)}
	markReconciling(vr)
	markPinned(vr)
	vr.Status.Cluster = cluster
	if o := r.readBundle(ctx, d); o != nil {
		return o.result, o.err
	}
	// A new spec waits for its dependencies there: the agent keeps the bundle it has.
	if o := r.awaitDependencies(ctx, d); o != nil {
		return o.result, o.err
	}
	// A dry run or a suspended bundle is not delivered, so it is no revision (as for a
	// push cluster, where neither reaches the history). The history is for people here:
	// the agent keeps what it owns on its member.
	if !vr.Spec.DryRun && !vr.Spec.Suspend {
		if _, _, err := r.recordRevision(ctx, vr, d.data, d.previousResult, nil); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "revision not recorded", "vidraresource", vr.Name)
			r.event(vr, corev1.EventTypeWarning, vidrav1alpha1.EventHistoryFailed, "revision not recorded: "+err.Error())
		}
	}
	ns := pull.Namespace(cluster)
	if err := r.mirrorContent(ctx, ns, vr); err != nil {
		markNotReady(vr, vidrav1alpha1.ReasonContentUnavailable, fmt.Sprintf("publish the content to the agent of cluster %s: %v", cluster, err))
		return ctrl.Result{RequeueAfter: contentRetry}, nil
	}
	bundle, err := r.publishBundle(ctx, ns, vr)
	if err != nil {
		markNotReady(vr, vidrav1alpha1.ReasonApplyFailed, fmt.Sprintf("publish the bundle to the agent of cluster %s: %v", cluster, err))
		return ctrl.Result{}, err
	}
	showAgentReport(vr, bundle, cluster, len(d.objects))
	// The agent's reports requeue it; the resync looks at the published bundle again.
	return r.resync(), nil
}

// mirrorContent copies the stored content the VidraResource names (its bundle and the
// one it previews) into the cluster's namespace, where its agent may read it.
func (r *Reconciler) mirrorContent(ctx context.Context, ns string, vr *vidrav1alpha1.VidraResource) error {
	refs := []*vidrav1alpha1.ContentReference{vr.Spec.Content} // checked as the bundle was read
	if p := vr.Spec.Preview; p != nil && p.Content != nil {
		// Content that is not the VidraResource's to preview never reaches the agent.
		if err := r.contentRefusal(ctx, vr, "spec.preview", p.Content.Digest); err == nil {
			refs = append(refs, p.Content)
		}
	}
	target := &content.Store{Client: r.Hub, Reader: r.HubReader, Namespace: ns, CacheBytes: 1}
	// Content a published bundle names is there already: it was mirrored before the
	// bundle was published, and nothing collects it while a bundle names it.
	published := &vidrav1alpha1.VidraBundle{}
	if err := r.Hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: vr.Name}, published); err != nil {
		published = nil
	}
	for _, ref := range refs {
		if ref == nil || (published != nil && names(published, ref.Digest)) {
			continue
		}
		// Stored again even when it is there (a rollback to older content): storing
		// refreshes its stored-at time, so the collector keeps it while the bundle that
		// names it is on its way.
		if r.Content == nil {
			return fmt.Errorf("%s: this operator has no content store: %w", ref.Digest, content.ErrUnavailable)
		}
		data, err := r.Content.Get(ctx, ref.Digest)
		if err != nil {
			return err
		}
		if err := target.PutAs(ctx, ref.Digest, data); err != nil {
			return err
		}
	}
	return nil
}

// publishBundle makes the VidraBundle of the VidraResource say what the VidraResource
// does now, and returns it as stored.
func (r *Reconciler) publishBundle(ctx context.Context, ns string, vr *vidrav1alpha1.VidraResource) (*vidrav1alpha1.VidraBundle, error) {
	want := bundleOf(ns, vr)
	have := &vidrav1alpha1.VidraBundle{}
	err := r.Hub.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		err := r.Hub.Create(ctx, want)
		if err == nil {
			return want, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create VidraBundle %s/%s: %w", ns, want.Name, err)
		}
		// Created by an earlier reconcile that the cache has not seen yet.
		if err := r.HubReader.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
			return nil, fmt.Errorf("get VidraBundle %s/%s: %w", ns, want.Name, err)
		}
	case err != nil:
		return nil, fmt.Errorf("get VidraBundle %s/%s: %w", ns, want.Name, err)
	}
	if !have.DeletionTimestamp.IsZero() {
		// A VidraResource of the same name, deleted and created again: the old one's
		// bundle goes first.
		return nil, fmt.Errorf("VidraBundle %s/%s is still being released by the agent", ns, want.Name)
	}
	if apiequality.Semantic.DeepEqual(have.Spec, want.Spec) && maps.Equal(have.Labels, want.Labels) &&
		maps.Equal(have.Annotations, want.Annotations) && controllerutil.ContainsFinalizer(have, vidrav1alpha1.AgentReleaseFinalizer) {
		return have, nil
	}
	updated := have.DeepCopy()
	updated.Spec, updated.Labels, updated.Annotations = want.Spec, want.Labels, want.Annotations
	controllerutil.AddFinalizer(updated, vidrav1alpha1.AgentReleaseFinalizer)
	if err := r.Hub.Update(ctx, updated); err != nil {
		return nil, fmt.Errorf("update VidraBundle %s/%s: %w", ns, want.Name, err)
	}
	return updated, nil
}

// bundleOf is the VidraBundle that publishes the VidraResource: its spec, for the
// cluster itself (the agent delivers to its own cluster; the hub, which alone sees the
// syncs, waited for its dependencies), and its labels and Vidra's
// annotations, which say where it comes from. Who asked for it stays on the hub.
func bundleOf(ns string, vr *vidrav1alpha1.VidraResource) *vidrav1alpha1.VidraBundle {
	spec := vr.Spec.DeepCopy()
	spec.Destination.Cluster, spec.Destination.Server = "", ""
	spec.DependsOn = nil // judged on the hub, before the bundle is published
	annotations := map[string]string{vidrav1alpha1.HubGenerationAnnotation: strconv.FormatInt(vr.Generation, 10)}
	for k, v := range vr.Annotations {
		if strings.HasPrefix(k, "vidra.infrahub.operators.com/") && !slices.Contains(vidrav1alpha1.RequesterAnnotations(), k) {
			annotations[k] = v
		}
	}
	return &vidrav1alpha1.VidraBundle{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: vr.Name, Labels: maps.Clone(vr.Labels), Annotations: annotations,
			Finalizers: []string{vidrav1alpha1.AgentReleaseFinalizer},
		},
		Spec: *spec,
	}
}

// showAgentReport makes the agent's report of the bundle the VidraResource's status,
// once it reports on the VidraResource's current generation; until then the
// VidraResource is Reconciling, waiting for it.
func showAgentReport(vr *vidrav1alpha1.VidraResource, b *vidrav1alpha1.VidraBundle, cluster string, objects int) {
	report := boundedReport(b.Status, objects)
	if report.HubGeneration != vr.Generation || b.Annotations[vidrav1alpha1.HubGenerationAnnotation] != strconv.FormatInt(vr.Generation, 10) {
		conditions.MarkReconciling(vr, vidrav1alpha1.ReasonProgressing,
			fmt.Sprintf("published to the agent of pull cluster %s; waiting for its report", cluster))
		return
	}
	revision, pinned := vr.Status.Revision, meta.FindStatusCondition(vr.Status.Conditions, vidrav1alpha1.ConditionPinned)
	vr.Status = *report.VidraResourceStatus.DeepCopy()
	vr.Status.Cluster, vr.Status.Revision = cluster, revision
	if pinned != nil {
		conditions.Set(vr, pinned.Type, pinned.Status, pinned.Reason, pinned.Message)
	}
}

// reconcileDeletePull lets a VidraResource of a pull cluster go once the cluster's agent
// released what it delivered: its bundle is deleted, the agent deletes its copy (which
// releases every object of it on the member) and says so, and only then does the bundle,
// and the VidraResource, go. done says the VidraResource may go now.
func (r *Reconciler) reconcileDeletePull(ctx context.Context, vr *vidrav1alpha1.VidraResource, cluster string) (done bool, err error) {
	key := client.ObjectKey{Namespace: pull.Namespace(cluster), Name: vr.Name}
	b := &vidrav1alpha1.VidraBundle{}
	err = r.Hub.Get(ctx, key, b)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get VidraBundle %s: %w", key, err)
	case b.Status.Released:
		return true, r.letBundleGo(ctx, b)
	case b.DeletionTimestamp.IsZero():
		if err := r.Hub.Delete(ctx, b, client.Preconditions{UID: &b.UID}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete VidraBundle %s: %w", key, err)
		}
	}
	markNotReady(vr, vidrav1alpha1.ReasonDeleting, fmt.Sprintf("waiting for the agent of pull cluster %s to release the objects", cluster))
	return false, nil
}

// withdrawBundle withdraws the bundle a VidraResource published while its cluster was a
// pull cluster, once the cluster is enrolled in push mode: the hub now delivers there in
// the same owners' names, so the agent hands its copy over (drops it without releasing
// what it delivered) and keeps applying nothing. Only a push VidraCluster is evidence
// enough: a VidraCluster missing (deleted by hand, a hub restored without it) withdraws
// nothing, lest a member be pruned; unenrolling removes the bundles with the namespace.
func (r *Reconciler) withdrawBundle(ctx context.Context, vr *vidrav1alpha1.VidraResource) error {
	name, err := r.Resolver.Resolve(vr.Spec.Destination)
	if err != nil || name == destination.LocalCluster {
		return nil //nolint:nilerr // no cluster, no bundle
	}
	b := &vidrav1alpha1.VidraBundle{}
	err = r.Hub.Get(ctx, client.ObjectKey{Namespace: pull.Namespace(string(name)), Name: vr.Name}, b)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("look up the VidraBundle of %s: %w", vr.Name, err)
	case !b.DeletionTimestamp.IsZero():
		// Withdrawn: once its agent handed it over, it goes.
		if b.Status.Released {
			return r.letBundleGo(ctx, b)
		}
		return nil
	}
	vc := &vidrav1alpha1.VidraCluster{}
	if err := r.HubReader.Get(ctx, client.ObjectKey{Name: string(name)}, vc); err != nil || vc.Status.Mode != vidrav1alpha1.ClusterModePush {
		return nil //nolint:nilerr // no evidence that the cluster moved to push
	}
	if b.Annotations[vidrav1alpha1.WithdrawAnnotation] != vidrav1alpha1.WithdrawHandOver {
		marked := b.DeepCopy()
		if marked.Annotations == nil {
			marked.Annotations = map[string]string{}
		}
		marked.Annotations[vidrav1alpha1.WithdrawAnnotation] = vidrav1alpha1.WithdrawHandOver
		if err := r.Hub.Patch(ctx, marked, client.MergeFromWithOptions(b, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("hand VidraBundle %s/%s over: %w", b.Namespace, b.Name, err))
		}
		b = marked
	}
	if err := r.Hub.Delete(ctx, b, client.Preconditions{UID: &b.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("withdraw VidraBundle %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

// names says whether the bundle names content of digest.
func names(b *vidrav1alpha1.VidraBundle, digest string) bool {
	return (b.Spec.Content != nil && b.Spec.Content.Digest == digest) ||
		(b.Spec.Preview != nil && b.Spec.Preview.Content != nil && b.Spec.Preview.Content.Digest == digest)
}

// Bounds of what the hub takes of an agent's report: an agent is no more trusted than its
// cluster, and what it reports is copied into the VidraResource, which every reader of
// the hub's VidraResources holds.
const (
	maxReportField   = 1 << 10
	maxReportChanges = 100
	maxReportDiff    = 4 << 10
)

// boundedReport is the agent's report cut to what the bundle of objects objects can
// honestly say: one inventory entry per object and as many again being released, short
// names and messages.
func boundedReport(st vidrav1alpha1.VidraBundleStatus, objects int) vidrav1alpha1.VidraBundleStatus {
	st = *st.DeepCopy()
	cut := func(s string) string { return conditions.Cut(s, maxReportField, "…") }
	if limit := 2*objects + 16; len(st.ManagedResources) > limit {
		st.ManagedResources = st.ManagedResources[:limit]
	}
	st.ResourceCount = int32(len(st.ManagedResources)) //nolint:gosec // bounded above
	for i := range st.ManagedResources {
		m := &st.ManagedResources[i]
		m.Kind, m.APIVersion, m.Name, m.Namespace, m.Status, m.Message = cut(m.Kind), cut(m.APIVersion), cut(m.Name), cut(m.Namespace), cut(m.Status), cut(m.Message)
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Reason, c.Message = cut(c.Reason), conditions.Bounded(c.Message)
	}
	st.LastError = conditions.Bounded(st.LastError)
	if p := st.Preview; p != nil {
		p.Message = conditions.Bounded(p.Message)
		if len(p.Changes) > maxReportChanges {
			p.Changes = p.Changes[:maxReportChanges]
		}
		for i := range p.Changes {
			c := &p.Changes[i]
			c.Diff, c.Message = conditions.Cut(c.Diff, maxReportDiff, "\n... (diff truncated)\n"), cut(c.Message)
		}
	}
	return st
}

// letBundleGo removes the finalizer of a bundle its agent released (or handed over).
func (r *Reconciler) letBundleGo(ctx context.Context, b *vidrav1alpha1.VidraBundle) error {
	released := b.DeepCopy()
	controllerutil.RemoveFinalizer(released, vidrav1alpha1.AgentReleaseFinalizer)
	if err := r.Hub.Patch(ctx, released, client.MergeFromWithOptions(b, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer of VidraBundle %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}
