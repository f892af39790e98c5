package infrahubsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/manifest"
	"github.com/vidra-operator/vidra/internal/tracing"
)

// target is one destination of an artifact's VidraResource.
type target struct {
	// segment names the destination in the VidraResource's name.
	segment string
	// key identifies the destination uniquely, for the name's hash.
	key string
	// destination is the VidraResource's.
	destination vidrav1alpha1.Destination
}

// destinations are the targets of every artifact, or nil when each artifact names its
// own (clusterFromTarget).
func (r *Reconciler) destinations(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync) ([]target, error) {
	d := ihs.Spec.Destination
	placement := vidrav1alpha1.Destination{Namespace: d.Namespace, ReconcileOnEvents: d.ReconcileOnEvents}
	switch {
	case d.ClusterFromTarget:
		return nil, nil
	case d.ClusterSelector != nil:
		selector, err := metav1.LabelSelectorAsSelector(d.ClusterSelector)
		if err != nil {
			return nil, fmt.Errorf("clusterSelector: %w", err)
		}
		var clusters vidrav1alpha1.VidraClusterList
		if err := r.Hub.List(ctx, &clusters); err != nil {
			return nil, fmt.Errorf("list VidraClusters: %w", err)
		}
		var targets []target
		for _, vc := range clusters.Items {
			if vc.DeletionTimestamp.IsZero() && selector.Matches(labels.Set(vc.Labels)) {
				targets = append(targets, clusterTarget(vc.Name, placement))
			}
		}
		return targets, nil
	case d.Cluster != "":
		return []target{clusterTarget(d.Cluster, placement)}, nil
	case d.Server != "":
		placement.Server = d.Server
		host := d.Server
		if u, err := url.Parse(d.Server); err == nil {
			host = u.Host
		}
		return []target{{segment: host, key: "server:" + d.Server, destination: placement}}, nil
	default:
		return []target{{segment: "local", key: "local:", destination: placement}}, nil
	}
}

func clusterTarget(cluster string, placement vidrav1alpha1.Destination) target {
	placement.Cluster = cluster
	return target{segment: cluster, key: "cluster:" + cluster, destination: placement}
}

// delivery delivers the artifacts of one sync and collects what happened.
type delivery struct {
	r      *Reconciler
	client *infrahub.Client
	snap   infrahub.Snapshot
	ihs    *vidrav1alpha1.InfrahubSync
	owned  map[string]*vidrav1alpha1.VidraResource

	// keep are the owned VidraResources to keep: delivered now, or left as they were
	// because their artifact could not be delivered.
	keep map[string]bool
	// problems say which artifacts could not be delivered and why; transient is the
	// first of their errors that may pass with a retry.
	problems  []string
	transient error
	// pending are artifacts Infrahub is still generating.
	pending []string
	// stored are the MD5 checksums of stored contents, by digest ("" when unreadable).
	stored map[string]string
	// revision is the sync revision a sync that delivers at once writes.
	revision string
	// stalled says why a progressive rollout cannot go on as the sync is written.
	stalled string
	// requeue is how soon a progressive rollout needs another look (0: at the interval).
	requeue time.Duration
}

// deliver writes artifact a's VidraResources, one per target, and returns its status.
// Whatever goes wrong, the VidraResources it had are kept as they were.
func (d *delivery) deliver(ctx context.Context, a infrahub.Artifact, targets []target, prev vidrav1alpha1.ArtifactStatus) vidrav1alpha1.ArtifactStatus {
	st := vidrav1alpha1.ArtifactStatus{
		ID: a.ID, Name: a.Name, Target: a.Target.Label, Definition: a.Definition,
		Checksum: prev.Checksum, VidraResources: prev.VidraResources,
	}
	existing := d.resourcesOf(a.ID)
	keepExisting := func() {
		for _, vr := range existing {
			d.keep[vr.Name] = true
		}
	}
	fail := func(msg string, err error) vidrav1alpha1.ArtifactStatus {
		keepExisting()
		st.Message = msg
		d.problem(a, msg, err)
		return st
	}

	if msg, generating := d.notReady(a); msg != "" {
		if !generating {
			return fail(msg, nil)
		}
		keepExisting()
		st.Message = msg
		return st
	}
	targets, msg := d.targetsOf(a, targets)
	if msg != "" {
		return fail(msg, nil)
	}

	// Build the desired VidraResources; content is filled in below if any needs writing.
	desired := make([]*vidrav1alpha1.VidraResource, 0, len(targets))
	stale := false
	for _, t := range targets {
		vr := d.resource(a, t)
		desired = append(desired, vr)
		if cur := d.owned[vr.Name]; cur == nil || !d.holds(ctx, cur, a.Checksum) {
			stale = true
		}
	}
	body, err := d.content(ctx, a, existing, stale)
	if err != nil {
		return fail(err.Error(), err)
	}

	// Write them.
	st.VidraResources = nil
	var writeErrs []error
	var pinned []string
	for _, vr := range desired {
		if cur := d.owned[vr.Name]; cur != nil && cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation] != "" {
			// A person rolled it back: it keeps its content until the rollout is resumed.
			d.keep[vr.Name] = true
			st.VidraResources = append(st.VidraResources, vr.Name)
			if !d.holds(ctx, cur, a.Checksum) {
				pinned = append(pinned, fmt.Sprintf("%s (revision %s)", vr.Name, cur.Annotations[vidrav1alpha1.PinnedRevisionAnnotation]))
			}
			continue
		}
		if body != nil {
			vr.Spec.Manifest, vr.Spec.Content = body.manifest, body.ref
		}
		if d.revision != "" {
			vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = d.revision
		}
		d.keep[vr.Name] = true
		if err := d.write(ctx, vr); err != nil {
			writeErrs = append(writeErrs, err)
		}
		st.VidraResources = append(st.VidraResources, vr.Name)
	}
	if err := errors.Join(writeErrs...); err != nil {
		return fail(err.Error(), err)
	}
	st.Checksum, st.StableChecksum = a.Checksum, a.Checksum
	if len(pinned) > 0 {
		st.Message = pinnedMessage(d.ihs.Name, a.Checksum, pinned)
	}
	// The VidraResource is the Event's related object, so the Events of different
	// artifacts are not folded into one series.
	if len(desired) == 0 {
		return st
	}
	related := desired[0]
	switch {
	case prev.ID == "":
		d.r.event(d.ihs, related, corev1.EventTypeNormal, vidrav1alpha1.EventArtifactAdded, fmt.Sprintf("artifact %s (%s, target %s) delivered as %s", a.Name, a.ID, a.Target.Label, strings.Join(st.VidraResources, ", ")))
	case prev.Checksum != a.Checksum:
		d.r.event(d.ihs, related, corev1.EventTypeNormal, vidrav1alpha1.EventArtifactUpdated, fmt.Sprintf("artifact %s (%s, target %s) changed (checksum %s): updated %s", a.Name, a.ID, a.Target.Label, a.Checksum, strings.Join(st.VidraResources, ", ")))
	}
	return st
}

// problem records why artifact a could not be delivered, and the first error that may
// pass with a retry.
func (d *delivery) problem(a infrahub.Artifact, msg string, err error) {
	d.problems = append(d.problems, fmt.Sprintf("artifact %s for %s: %s", a.ID, a.Target.Label, msg))
	d.retry(err)
}

// retry keeps err, when it may pass with a retry and is the first such, to back off on.
func (d *delivery) retry(err error) {
	if err != nil && d.transient == nil && isTransient(err) {
		d.transient = err
	}
}

// notReady says why artifact a is not delivered as Infrahub lists it ("" when it is
// Ready); generating: Infrahub is still at it, which is no error and is looked at soon.
func (d *delivery) notReady(a infrahub.Artifact) (msg string, generating bool) {
	switch a.Status {
	case infrahub.StatusReady:
		return "", false
	case infrahub.StatusError:
		return "Infrahub failed to generate it (status Error); the last delivered content is kept", false
	}
	d.pending = append(d.pending, fmt.Sprintf("artifact %s for %s (%s)", a.ID, a.Target.Label, a.Status))
	return fmt.Sprintf("status %s in Infrahub; the last delivered content is kept until it is Ready", a.Status), true
}

// targetsOf are artifact a's destinations: dests, or with clusterFromTarget the cluster
// its target names; msg says why that target names none.
func (d *delivery) targetsOf(a infrahub.Artifact, dests []target) (targets []target, msg string) {
	if !d.ihs.Spec.Destination.ClusterFromTarget {
		return dests, ""
	}
	cluster := a.Target.Label
	if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
		return nil, fmt.Sprintf("its target's display label %q does not name a cluster: %s", cluster, strings.Join(errs, ", "))
	}
	placement := vidrav1alpha1.Destination{Namespace: d.ihs.Spec.Destination.Namespace, ReconcileOnEvents: d.ihs.Spec.Destination.ReconcileOnEvents}
	return []target{clusterTarget(cluster, placement)}, ""
}

// resourcesOf are the owned VidraResources that deliver artifact id.
func (d *delivery) resourcesOf(id string) []*vidrav1alpha1.VidraResource {
	var out []*vidrav1alpha1.VidraResource
	for _, vr := range d.owned {
		if vr.Annotations[vidrav1alpha1.ArtifactIDAnnotation] == id {
			out = append(out, vr)
		}
	}
	return out
}

// body is what a VidraResource holds of an artifact's content: the manifest inline, or a
// reference to it in the content store.
type body struct {
	manifest string
	ref      *vidrav1alpha1.ContentReference
}

// content is artifact a's content. A VidraResource of the sync that already holds the
// checksum's content gives it, so Infrahub is asked only for content no VidraResource
// holds: the VidraResources are the checksum cache, each entry checked against its
// checksum, since a person may have edited it. Downloaded content must decode as a
// manifest before it goes anywhere; content over the inline limit is stored once in the
// content store, whatever the number of VidraResources that deliver it.
func (d *delivery) content(ctx context.Context, a infrahub.Artifact, existing []*vidrav1alpha1.VidraResource, stale bool) (*body, error) {
	for _, vr := range existing {
		if d.holds(ctx, vr, a.Checksum) {
			return &body{manifest: vr.Spec.Manifest, ref: vr.Spec.Content.DeepCopy()}, nil
		}
	}
	if !stale {
		return nil, nil // nothing will be written
	}
	downloadCtx, span := tracing.Tracer().Start(ctx, "infrahub.download", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("infrahub.artifact_id", a.ID), attribute.String("infrahub.checksum", a.Checksum)))
	data, err := d.client.Download(downloadCtx, d.snap, a)
	span.SetAttributes(attribute.Int("infrahub.bytes", len(data)))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	d.r.Metrics.observeDownload(err)
	var mismatch *infrahub.ChecksumMismatchError
	switch {
	case errors.As(err, &mismatch):
		return nil, fmt.Errorf("content refused: %w", err)
	case err != nil:
		return nil, err
	}
	if _, err := manifest.Decode(data); err != nil {
		return nil, fmt.Errorf("content is not a Kubernetes manifest: %w", err)
	}
	if len(data) <= d.r.inlineLimit() {
		return &body{manifest: string(data)}, nil
	}
	if d.r.Content == nil {
		return nil, fmt.Errorf("content of %d bytes is over the %d bytes a VidraResource holds inline, and this operator has no content store", len(data), d.r.inlineLimit())
	}
	digest, err := d.r.Content.Put(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("store content: %w", err)
	}
	return &body{ref: &vidrav1alpha1.ContentReference{Digest: digest}}, nil
}

// holds reports whether a VidraResource delivers the content with checksum: inline, or
// stored content whose recorded MD5 is the checksum (read once per digest and sync).
func (d *delivery) holds(ctx context.Context, vr *vidrav1alpha1.VidraResource, checksum string) bool {
	if vr.Annotations[vidrav1alpha1.ArtifactChecksumAnnotation] != checksum {
		return false
	}
	if vr.Spec.Content == nil {
		return infrahub.Checksum([]byte(vr.Spec.Manifest)) == checksum
	}
	if d.r.Content == nil {
		return false
	}
	digest := vr.Spec.Content.Digest
	sum, ok := d.stored[digest]
	if !ok {
		info, err := d.r.Content.Stat(ctx, digest)
		if err == nil {
			sum = info.MD5
		}
		d.stored[digest] = sum
	}
	return sum == checksum
}

// resource is the VidraResource that delivers artifact a to target t, without content.
// The template's labels and annotations come first, so the sync's own always win.
func (d *delivery) resource(a infrahub.Artifact, t target) *vidrav1alpha1.VidraResource {
	tpl := d.ihs.Spec.Template
	if tpl == nil {
		tpl = &vidrav1alpha1.VidraResourceTemplate{}
	}
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{
			Name: resourceName(d.ihs.Name, t.segment, t.key, a.ID),
			Labels: mergeInto(maps.Clone(tpl.Labels), map[string]string{
				vidrav1alpha1.InfrahubSyncLabel: d.ihs.Name,
			}),
			Annotations: mergeInto(maps.Clone(tpl.Annotations), map[string]string{
				vidrav1alpha1.ArtifactIDAnnotation:       a.ID,
				vidrav1alpha1.ArtifactChecksumAnnotation: a.Checksum,
				vidrav1alpha1.ArtifactNameAnnotation:     a.Name,
				vidrav1alpha1.ArtifactTargetAnnotation:   a.Target.Label,
			}),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d.ihs, vidrav1alpha1.GroupVersion.WithKind("InfrahubSync"))},
		},
		Spec: vidrav1alpha1.VidraResourceSpec{Destination: t.destination},
	}
	applyTemplate(&vr.Spec, tpl)
	return vr
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
func (d *delivery) write(ctx context.Context, vr *vidrav1alpha1.VidraResource) (retErr error) {
	// Only a write gets a span, and carries its trace context to the VidraResource's
	// reconcile: an unchanged VidraResource is left as it is, annotations included.
	traced := func(action string) (context.Context, func()) {
		wctx, span := tracing.Tracer().Start(ctx, "vidraresource.write", trace.WithAttributes(
			attribute.String("vidra.vidraresource", vr.Name), attribute.String("vidra.cluster", cmp.Or(vr.Spec.Destination.Cluster, vr.Spec.Destination.Server, "local")),
			attribute.String("vidra.action", action), attribute.String("vidra.checksum", vr.Annotations[vidrav1alpha1.ArtifactChecksumAnnotation])))
		return wctx, func() {
			if retErr != nil {
				span.SetStatus(codes.Error, retErr.Error())
			}
			span.End()
		}
	}
	cur := d.owned[vr.Name]
	if cur == nil {
		wctx, end := traced("create")
		defer end()
		created := vr.DeepCopy() // the trace context is for the create only
		tracing.Inject(wctx, created)
		// Created with the finalizer its reconcile would add: one write fewer per delivery.
		controllerutil.AddFinalizer(created, vidrav1alpha1.VidraResourceFinalizer)
		err := d.r.Hub.Create(ctx, created)
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("create VidraResource %s: %w", vr.Name, err)
			}
			return nil
		}
		// The cache had not seen it yet, or it is someone else's.
		cur = &vidrav1alpha1.VidraResource{}
		if err := d.r.HubReader.Get(ctx, client.ObjectKeyFromObject(vr), cur); err != nil {
			return fmt.Errorf("get VidraResource %s: %w", vr.Name, err)
		}
		if !metav1.IsControlledBy(cur, d.ihs) {
			return fmt.Errorf("VidraResource %s exists and was not made by this InfrahubSync; it is left alone", vr.Name)
		}
	}
	if vr.Spec.Manifest == "" && vr.Spec.Content == nil {
		vr.Spec.Manifest, vr.Spec.Content = cur.Spec.Manifest, cur.Spec.Content // content unchanged, not fetched
	}
	if vr.Spec.Manifest == cur.Spec.Manifest && apiequality.Semantic.DeepEqual(vr.Spec.Content, cur.Spec.Content) {
		// The content is the one delivered since an earlier revision: that one it keeps.
		if rev, ok := cur.Annotations[vidrav1alpha1.SyncRevisionAnnotation]; ok {
			vr.Annotations[vidrav1alpha1.SyncRevisionAnnotation] = rev
		} else {
			delete(vr.Annotations, vidrav1alpha1.SyncRevisionAnnotation)
		}
		if at, ok := cur.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation]; ok {
			vr.Annotations[vidrav1alpha1.RolloutUpdatedAtAnnotation] = at
		}
	}
	// Only what the sync sets is compared and written: the API server's defaults and
	// fields outside the template keep their values, so an unchanged sync writes nothing.
	updated := cur.DeepCopy()
	updated.Labels = mergeInto(updated.Labels, vr.Labels)
	updated.Annotations = mergeInto(updated.Annotations, vr.Annotations)
	updated.Spec.Destination = vr.Spec.Destination
	updated.Spec.Manifest = vr.Spec.Manifest
	updated.Spec.Content = vr.Spec.Content
	updated.Spec.Preview = vr.Spec.Preview
	if tpl := d.ihs.Spec.Template; tpl != nil {
		applyTemplate(&updated.Spec, tpl)
	}
	if apiequality.Semantic.DeepEqual(updated.ObjectMeta, cur.ObjectMeta) && apiequality.Semantic.DeepEqual(updated.Spec, cur.Spec) {
		return nil
	}
	wctx, end := traced("update")
	defer end()
	tracing.Inject(wctx, updated)
	// A merge patch of what changed: the VidraResource controller writes its status and
	// finalizer meanwhile, which must not make this write conflict.
	if err := d.r.Hub.Patch(ctx, updated, client.MergeFrom(cur)); err != nil {
		return fmt.Errorf("update VidraResource %s: %w", vr.Name, err)
	}
	return nil
}

func mergeInto(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	maps.Copy(dst, src)
	return dst
}

// pinnedMessage says which VidraResources a rollback holds while Infrahub has newer
// content for them.
func pinnedMessage(sync, checksum string, pinned []string) string {
	return fmt.Sprintf("pinned by a rollback: %s; Infrahub has newer content (checksum %s), delivered after `kubectl vidra rollout resume %s`",
		strings.Join(pinned, ", "), checksum, sync)
}
