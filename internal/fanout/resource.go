package fanout

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
)

// resource is the VidraResource that delivers item it to target t, without content.
// The template's labels and annotations come first, so the sync's own always win.
func (d *Delivery) resource(it Item, t Target) *vidrav1alpha1.VidraResource {
	tpl := d.sync.Template
	if tpl == nil {
		tpl = &vidrav1alpha1.VidraResourceTemplate{}
	}
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{
			Name: it.resourceName(d.sync.Object.GetName(), t),
			Labels: mergeInto(withoutSyncLabels(tpl.Labels), map[string]string{
				d.sync.Object.SyncKind().Label: d.sync.Object.GetName(),
			}),
			Annotations:     mergeInto(withoutRequester(tpl.Annotations), bundleAnnotations(it)),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d.sync.Object, vidrav1alpha1.GroupVersion.WithKind(d.sync.Object.SyncKind().Kind))},
		},
		Spec: vidrav1alpha1.VidraResourceSpec{Destination: t.destination, DependsOn: d.sync.Object.Dependencies()},
	}
	vr.Spec.HealthCheckExprs, vr.Spec.Timeout = d.sync.Object.HealthChecks()
	applyTemplate(&vr.Spec, tpl)
	return vr
}

// bundleAnnotations say which bundle a VidraResource delivers; a target or revision only
// when the item has one.
func bundleAnnotations(it Item) map[string]string {
	out := map[string]string{
		vidrav1alpha1.BundleIDAnnotation:       it.ID,
		vidrav1alpha1.BundleChecksumAnnotation: it.Checksum,
		vidrav1alpha1.BundleNameAnnotation:     it.Name,
	}
	if it.Target != "" {
		out[vidrav1alpha1.BundleTargetAnnotation] = it.Target
	}
	if it.Revision != "" {
		out[vidrav1alpha1.BundleRevisionAnnotation] = it.Revision
	}
	if it.Variables != "" {
		out[vidrav1alpha1.BundleVariablesAnnotation] = it.Variables
	}
	return out
}

// upgraded is cur with its bundle annotations under the keys this version writes: one
// written by an earlier version, the same but for those keys, is left as it is.
func upgraded(cur, vr *vidrav1alpha1.VidraResource) *vidrav1alpha1.VidraResource {
	_, revision := vr.Annotations[vidrav1alpha1.BundleRevisionAnnotation]
	annotations := vidrav1alpha1.UpgradedBundleAnnotations(cur.Annotations, revision)
	if annotations == nil {
		return cur
	}
	out := cur.DeepCopy()
	out.Annotations = annotations
	return out
}

// withoutSyncLabels copies a template's labels but those naming a sync: a template
// cannot credit its VidraResources to a sync of another kind.
func withoutSyncLabels(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	for _, k := range vidrav1alpha1.SyncKinds() {
		delete(out, k.Label)
	}
	return out
}

// withoutRequester copies a template's annotations but who asked: the API server records
// that, never a template (a VidraResource a sync makes is the operator's write, which the
// admission policy does not stamp).
func withoutRequester(annotations map[string]string) map[string]string {
	out := maps.Clone(annotations)
	for _, k := range vidrav1alpha1.RequesterAnnotations() {
		delete(out, k)
	}
	return out
}

// applyTemplate sets the spec fields the template sets; the others keep their value.
func applyTemplate(spec *vidrav1alpha1.VidraResourceSpec, tpl *vidrav1alpha1.VidraResourceTemplate) {
	if tpl.Prune != nil {
		spec.Prune = ptr.To(*tpl.Prune)
	}
	if tpl.AdoptExisting != "" {
		spec.AdoptExisting = tpl.AdoptExisting
	}
	if tpl.ServiceAccountName != "" {
		spec.ServiceAccountName = tpl.ServiceAccountName
	}
	if tpl.VMRollout != nil {
		spec.VMRollout = tpl.VMRollout.DeepCopy()
	}
	if tpl.DryRun {
		spec.DryRun = true
	}
	if tpl.HistoryLimit != nil {
		spec.HistoryLimit = ptr.To(*tpl.HistoryLimit)
	}
}

// write creates vr or brings the sync's existing one to it. A VidraResource of that name
// that is not this sync's is never touched.
func (d *Delivery) write(ctx context.Context, vr *vidrav1alpha1.VidraResource) error {
	cur := d.owned[vr.Name]
	if cur == nil {
		existing, err := d.create(ctx, vr)
		if existing == nil || err != nil {
			if err == nil {
				d.noteWritten(vr)
			}
			return err
		}
		cur = existing
	}
	keepUnchangedContent(vr, cur)
	updated, changed := d.updateOf(cur, vr)
	if !changed {
		return nil
	}
	wctx, end := startWrite(ctx, updated, "update")
	tracing.Inject(wctx, updated)
	d.cfg.Written.record(updated, d.sync.Template)
	// A merge patch of what changed: the VidraResource controller writes its status and
	// finalizer meanwhile, which must not make this write conflict.
	err := d.cfg.Hub.Patch(ctx, updated, client.MergeFrom(cur))
	if err != nil {
		err = fmt.Errorf("update VidraResource %s: %w", vr.Name, err)
	} else {
		d.noteWritten(updated)
	}
	end(err)
	return err
}

// startWrite starts the span of a write of vr, which carries its trace context to the
// VidraResource's reconcile; end closes it with the write's error. Only a write gets a
// span: an unchanged VidraResource is left as it is, annotations included.
func startWrite(ctx context.Context, vr *vidrav1alpha1.VidraResource, action string) (context.Context, func(error)) {
	ctx, span := tracing.Tracer().Start(ctx, "vidraresource.write", trace.WithAttributes(
		attribute.String("vidra.vidraresource", vr.Name), attribute.String("vidra.cluster", cmp.Or(vr.Spec.Destination.Cluster, vr.Spec.Destination.Server, "local")),
		attribute.String("vidra.action", action), attribute.String("vidra.checksum", vr.Annotations[vidrav1alpha1.BundleChecksumAnnotation])))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// create creates vr, with the finalizer its reconcile would add (one write fewer per
// delivery). When one of that name exists already (the cache had not seen it yet) it
// returns it if it is the sync's, else reports the name taken.
func (d *Delivery) create(ctx context.Context, vr *vidrav1alpha1.VidraResource) (_ *vidrav1alpha1.VidraResource, err error) {
	wctx, end := startWrite(ctx, vr, "create")
	defer func() { end(err) }()
	created := vr.DeepCopy() // the trace context is for the create only
	tracing.Inject(wctx, created)
	controllerutil.AddFinalizer(created, vidrav1alpha1.VidraResourceFinalizer)
	d.cfg.Written.record(created, d.sync.Template)
	if err := d.cfg.Hub.Create(ctx, created); !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return nil, fmt.Errorf("create VidraResource %s: %w", vr.Name, err)
		}
		return nil, nil
	}
	cur := &vidrav1alpha1.VidraResource{}
	if err := d.cfg.HubReader.Get(ctx, client.ObjectKeyFromObject(vr), cur); err != nil {
		return nil, fmt.Errorf("get VidraResource %s: %w", vr.Name, err)
	}
	if !metav1.IsControlledBy(cur, d.sync.Object) {
		return nil, d.nameTaken(vr, cur)
	}
	return cur, nil
}

// keepUnchangedContent gives vr the content cur holds when vr brings none (it was not
// fetched: unchanged), and, while the content is the one delivered since an earlier
// revision, that revision and when the rollout moved it there.
func keepUnchangedContent(vr, cur *vidrav1alpha1.VidraResource) {
	if vr.Spec.Manifest == "" && vr.Spec.Content == nil {
		vr.Spec.Manifest, vr.Spec.Content = cur.Spec.Manifest, cur.Spec.Content
	}
	if vr.Spec.Manifest != cur.Spec.Manifest || !apiequality.Semantic.DeepEqual(vr.Spec.Content, cur.Spec.Content) {
		return
	}
	if rev, ok := cur.Annotations[vidrav1alpha1.SyncRevisionAnnotation]; ok {
		vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = rev
	} else {
		delete(vr.Annotations, vidrav1alpha1.SyncRevisionAnnotation)
	}
	if at, ok := cur.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation]; ok {
		vr.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation] = at
	}
}

// updateOf is cur brought to vr, and whether that changes it. Only what the sync sets is
// compared and written: the API server's defaults and fields outside the template keep
// their values, so an unchanged sync writes nothing.
func (d *Delivery) updateOf(cur, vr *vidrav1alpha1.VidraResource) (*vidrav1alpha1.VidraResource, bool) {
	was := upgraded(cur, vr)
	updated := was.DeepCopy()
	updated.Labels = mergeInto(updated.Labels, vr.Labels)
	updated.Annotations = mergeInto(updated.Annotations, vr.Annotations)
	if _, ok := vr.Annotations[vidrav1alpha1.BundleVariablesAnnotation]; !ok &&
		vr.Annotations[vidrav1alpha1.BundleChecksumAnnotation] != was.Annotations[vidrav1alpha1.BundleChecksumAnnotation] {
		// New content built without variables: those of the old are no longer what it
		// was built with. (Content carried as it is keeps them.)
		delete(updated.Annotations, vidrav1alpha1.BundleVariablesAnnotation)
	}
	updated.Spec.Destination = vr.Spec.Destination
	updated.Spec.Manifest = vr.Spec.Manifest
	updated.Spec.Content = vr.Spec.Content
	updated.Spec.Preview = vr.Spec.Preview
	updated.Spec.DependsOn = vr.Spec.DependsOn
	updated.Spec.HealthCheckExprs, updated.Spec.Timeout = vr.Spec.HealthCheckExprs, vr.Spec.Timeout
	if tpl := d.sync.Template; tpl != nil {
		applyTemplate(&updated.Spec, tpl)
	}
	specChanged := !apiequality.Semantic.DeepEqual(updated.Spec, was.Spec)
	if specChanged {
		// The operator writes the spec now: whoever changed it before asked for nothing
		// it holds, and is not asked about it (the content it names is the sync's).
		for _, k := range vidrav1alpha1.RequesterAnnotations() {
			delete(updated.Annotations, k)
		}
	}
	return updated, specChanged || !apiequality.Semantic.DeepEqual(updated.ObjectMeta, was.ObjectMeta)
}

// nameTaken reports a VidraResource that holds the name the sync gives vr without being
// the sync's (made before it, by hand or by another team): it is left alone, and said so
// on it and on the sync, naming who asked for it, so an admin can tell which to rename.
func (d *Delivery) nameTaken(vr, taken *vidrav1alpha1.VidraResource) error {
	kind, name := d.sync.Object.SyncKind().Kind, d.sync.Object.GetName()
	by := ""
	if who := taken.Annotations[vidrav1alpha1.RequestedByAnnotation]; who != "" {
		by = " (asked for by " + who + ")"
	}
	where := cmp.Or(vr.Spec.Destination.Cluster, vr.Spec.Destination.Server, vidrav1alpha1.LocalClusterName)
	d.cfg.Events.Record(taken, d.sync.Object, corev1.EventTypeWarning, vidrav1alpha1.EventNameTaken, fmt.Sprintf(
		"this VidraResource holds the name %s %s gives its bundle for cluster %s, which is not delivered there while it does: rename or delete it", kind, name, where))
	return fmt.Errorf("VidraResource %s exists and was not made by this %s%s; it is left alone, and this bundle is not delivered to %s until it is renamed or deleted", vr.Name, kind, by, where)
}

func mergeInto(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	maps.Copy(dst, src)
	return dst
}

// pinnedMessage says which VidraResources a rollback holds while the source has newer
// content for them.
func (d *Delivery) pinnedMessage(checksum string, pinned []string) string {
	return fmt.Sprintf("pinned by a rollback: %s; %s has newer content (checksum %s), delivered after `kubectl vidra rollout resume %s`",
		strings.Join(pinned, ", "), d.sync.SourceName, checksum, d.sync.Object.SyncKind().ResumeArgument(d.sync.Object.GetName()))
}
