package vidraresource

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/apply"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/manifest"
)

// maxPreviewChanges bounds the changes a preview lists: it lives in the status.
const maxPreviewChanges = 100

// previewOnly ends the reconcile of a dry run: it previews the bundle and applies nothing.
func (r *Reconciler) previewOnly(ctx context.Context, d *delivery) *outcome {
	if !d.vr.Spec.DryRun {
		return nil
	}
	return stop(r.reconcileDryRun(ctx, d.vr, d.engine, d.objects, nameOf(d.data, d.vr.Spec.Content)), nil)
}

// nameOf is the digest that names data: that of the stored content ref names (sealed
// content's is no hash of its bytes, which a status must not show), else data's own.
func nameOf(data []byte, ref *vidrav1alpha1.ContentReference) string {
	if ref != nil {
		return ref.Digest
	}
	return content.Digest(data)
}

// reconcileDryRun computes the preview of the bundle and applies nothing.
func (r *Reconciler) reconcileDryRun(ctx context.Context, vr *vidrav1alpha1.VidraResource, engine *apply.Engine, objects []*unstructured.Unstructured, digest string) ctrl.Result {
	if !r.previewFresh(vr, digest) {
		previous := inventory.FromEntries(vr.Status.ManagedResources)
		desired, _ := refsOf(engine, objects)
		changes := engine.Preview(ctx, objects, inventory.Difference(previous, desired), prunes(vr))
		vr.Status.Preview = previewStatus(vr, digest, "", changes)
	}
	p := vr.Status.Preview
	msg := fmt.Sprintf("dry run, nothing applied: %d to create, %d to update, %d to prune, %d unchanged", p.Create, p.Update, p.Prune, p.Unchanged)
	if p.Failed > 0 {
		msg += fmt.Sprintf(", %d refused by the dry-run", p.Failed)
	}
	setCondition(vr, vidrav1alpha1.ConditionReady, metav1.ConditionTrue, vidrav1alpha1.ReasonDryRun, msg)
	setCondition(vr, vidrav1alpha1.ConditionReconciling, metav1.ConditionFalse, vidrav1alpha1.ReasonDryRun, msg)
	vr.Status.DeployState = vidrav1alpha1.StateSucceeded
	return r.resync()
}

// previewPending computes the preview of the content waiting for this VidraResource
// (spec.preview), or clears the preview when nothing waits.
func (r *Reconciler) previewPending(ctx context.Context, vr *vidrav1alpha1.VidraResource) {
	pending := vr.Spec.Preview
	if vr.Spec.DryRun {
		return
	}
	if pending == nil {
		vr.Status.Preview = nil
		return
	}
	// Whatever guards an apply guards a preview, before anything is read: a preview
	// shows live objects' fields to every reader of the VidraResource. Its destination
	// and right come first, so a preview that may not go anywhere reads no content.
	dest, why := r.previewTarget(ctx, vr)
	if why != "" {
		vr.Status.Preview = refusedPreview(vr, pending.Revision, why)
		return
	}
	data, err := r.contentOf(ctx, vr, "spec.preview", pending.Manifest, pending.Content)
	if err != nil {
		vr.Status.Preview = refusedPreview(vr, pending.Revision, err.Error())
		return
	}
	digest := nameOf(data, pending.Content)
	if r.previewFresh(vr, digest) {
		return
	}
	vr.Status.Preview = r.previewOn(ctx, vr, dest, "spec.preview", data, digest, pending.Revision)
}

// DryRun previews data on vr's cluster as vr would apply it there, nothing applied:
// its destination, the right of whoever asked for it, the cluster's delivery policy and
// the API server's dry-run, against what vr delivered (what data leaves out is pruned).
// A preview refused before the dry-run has a Message and no ComputedAt; a cluster that
// pulls its bundles, which the hub does not reach, has none (nil).
func (r *Reconciler) DryRun(ctx context.Context, vr *vidrav1alpha1.VidraResource, data []byte, revision string) *vidrav1alpha1.PreviewStatus {
	if _, pulls := r.pullCluster(ctx, vr); pulls {
		return nil
	}
	dest, why := r.previewTarget(ctx, vr)
	if why != "" {
		return refusedPreview(vr, revision, why)
	}
	return r.previewOn(ctx, vr, dest, "the bundle", data, content.Digest(data), revision)
}

// previewTarget is vr's destination, or why a preview may not go there.
func (r *Reconciler) previewTarget(ctx context.Context, vr *vidrav1alpha1.VidraResource) (*target, string) {
	dest, err := r.target(ctx, vr)
	if err != nil {
		return nil, "destination: " + err.Error()
	}
	if denied := r.rightRefusal(ctx, vr, dest); denied.why != "" {
		return nil, denied.why
	}
	return dest, ""
}

func refusedPreview(vr *vidrav1alpha1.VidraResource, revision, why string) *vidrav1alpha1.PreviewStatus {
	return &vidrav1alpha1.PreviewStatus{Revision: revision, ObservedGeneration: vr.Generation, Message: why}
}

// previewOn dry-runs data (what names it in messages) on dest, placed and checked as
// an apply of vr would be.
func (r *Reconciler) previewOn(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target, what string, data []byte, digest, revision string) *vidrav1alpha1.PreviewStatus {
	objects, err := manifest.Decode(data)
	if err != nil {
		return refusedPreview(vr, revision, what+": "+err.Error())
	}
	if denied := r.whyRefused(ctx, vr, dest, objects); denied.why != "" {
		return refusedPreview(vr, revision, denied.why)
	}
	placed, p, err := r.withDestinationNamespace(ctx, dest, vr, objects)
	if err != nil {
		return refusedPreview(vr, revision, err.Error())
	}
	if len(placed) > len(objects) {
		if denied := r.whyRefused(ctx, vr, dest, placed); denied.why != "" {
			return refusedPreview(vr, revision, denied.why)
		}
	}
	engine := r.engine(ctx, vr, dest, p)
	previous := inventory.FromEntries(vr.Status.ManagedResources)
	desired, _ := refsOf(engine, placed)
	return previewStatus(vr, digest, revision, engine.Preview(ctx, placed, inventory.Difference(previous, desired), prunes(vr)))
}

// previewFresh says whether the status already previews this content for this generation,
// computed less than a resync ago.
func (r *Reconciler) previewFresh(vr *vidrav1alpha1.VidraResource, digest string) bool {
	p := vr.Status.Preview
	return p != nil && p.Digest == digest && p.ObservedGeneration == vr.Generation && p.ComputedAt != nil &&
		time.Since(p.ComputedAt.Time) < r.ResyncInterval
}

func previewStatus(vr *vidrav1alpha1.VidraResource, digest, revision string, changes []apply.Change) *vidrav1alpha1.PreviewStatus {
	now := metav1.Now()
	p := &vidrav1alpha1.PreviewStatus{Digest: digest, Revision: revision, ObservedGeneration: vr.Generation, ComputedAt: &now}
	for _, c := range changes {
		switch c.Action {
		case vidrav1alpha1.PreviewCreate:
			p.Create++
		case vidrav1alpha1.PreviewUpdate:
			p.Update++
		case vidrav1alpha1.PreviewPrune:
			p.Prune++
		case vidrav1alpha1.PreviewUnchanged:
			p.Unchanged++
			continue
		case vidrav1alpha1.PreviewFailed:
			p.Failed++
		}
		if len(p.Changes) == maxPreviewChanges {
			p.Message = fmt.Sprintf("only the first %d changes are listed", maxPreviewChanges)
			continue
		}
		apiVersion, kind := c.Ref.GVK.ToAPIVersionAndKind()
		p.Changes = append(p.Changes, vidrav1alpha1.PreviewChange{
			Action: c.Action, APIVersion: apiVersion, Kind: kind, Namespace: c.Ref.Namespace, Name: c.Ref.Name, Diff: c.Diff, Message: c.Message,
		})
	}
	return p
}
