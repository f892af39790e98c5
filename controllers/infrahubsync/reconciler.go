// Package infrahubsync reconciles InfrahubSyncs: it lists the artifacts of one name in
// Infrahub, downloads those whose checksum changed, and keeps one VidraResource per
// artifact and destination cluster, removing those whose artifact or cluster is gone. It
// also receives Infrahub's signed webhooks, which ask for a sync at once.
package infrahubsync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sevents "k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/admissionguard"
	"github.com/vidra-operator/vidra/internal/content"
	"github.com/vidra-operator/vidra/internal/credentials"
	"github.com/vidra-operator/vidra/internal/events"
	"github.com/vidra-operator/vidra/internal/fairshare"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/policy"
)

// Reconciler reconciles InfrahubSyncs on the hub.
type Reconciler struct {
	// Hub reads InfrahubSyncs, VidraClusters and VidraResources from the cache and writes
	// VidraResources and status.
	Hub client.Client
	// HubReader reads Secrets, only in Namespace, without caching them.
	HubReader client.Reader
	// Namespace is the operator's: the only namespace Secrets are read from.
	Namespace string
	// HTTPTimeout bounds every request to Infrahub.
	HTTPTimeout time.Duration
	// Limits bound each sync's reading of Infrahub (artifacts, bytes, time), and its
	// Budget the memory all syncs' answers take at once. Zero: unbounded.
	Limits infrahub.Limits
	// Recorder records Events on InfrahubSyncs.
	Recorder k8sevents.EventRecorder
	// Metrics, when set, count requests, downloads and sync durations.
	Metrics *Metrics
	// Content stores artifacts larger than InlineLimit, which a VidraResource then names
	// (spec.content). Nil: every artifact is inline.
	Content *content.Store
	// InlineLimit is the largest artifact held inline in spec.manifest (DefaultInlineLimit
	// when 0).
	InlineLimit int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// PerSourceSyncs bounds the syncs of one Infrahub (scheme, host and port) that run at
	// once, so a slow or trickling one leaves the other workers to the rest (0: no bound).
	PerSourceSyncs int
	// PerRequesterSyncs bounds the syncs of one requester (who last wrote their spec)
	// that run at once, so a tenant whose syncs read several slow Infrahubs leaves the
	// other workers to the rest (0: no bound).
	PerRequesterSyncs int
	// Guards, when set, say whether the hub's admission policies are in force; while one
	// is missing, no sync is delivered. Nil: none are required.
	Guards *admissionguard.Checker
	share  fairshare.SyncShare

	sourcesOnce sync.Once
	srcs        *sources
	// written holds, per InfrahubSync, the resourceVersion of this process's last status
	// write: a rollout decides from its status, which a lagging cache must not roll back.
	written fanout.StatusWrites
	// resourcesWritten is what the kind's deliveries last wrote to each VidraResource,
	// so that the controller is woken by others' changes only (set up with it).
	resourcesWritten *fanout.Written
	// traced holds, per InfrahubSync, the last trace context taken from its annotations,
	// so that only the reconcile a webhook asked for joins that webhook's trace.
	traced sync.Map
}

// DefaultInlineLimit is the largest artifact a VidraResource holds inline: well under the
// API server's object limit, with room for its status.
const DefaultInlineLimit = 256 << 10

func (r *Reconciler) inlineLimit() int {
	if r.InlineLimit > 0 {
		return r.InlineLimit
	}
	return DefaultInlineLimit
}

// defaultInterval applies when spec.interval is unset (the API server defaults it).
const defaultInterval = time.Minute

// pendingPoll is how soon artifacts Infrahub is still generating are looked at again.
const pendingPoll = 10 * time.Second

func (r *Reconciler) sources() *sources {
	r.sourcesOnce.Do(func() {
		r.srcs = &sources{
			reader: r.HubReader, gate: credentials.NewGate(r.HubReader, r.Hub, r.Namespace),
			timeout: r.HTTPTimeout, observe: r.Metrics.observeRequest,
		}
	})
	return r.srcs
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile narrates one sync of an InfrahubSync.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	// Get the InfrahubSync.
	ihs, err := fanout.Read(ctx, &r.written, r.Hub, r.HubReader, req.NamespacedName, func() *vidrav1alpha1.InfrahubSync { return &vidrav1alpha1.InfrahubSync{} })
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.sources().forget(req.Name)
			r.written.Forget(req.Name)
			r.traced.Delete(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Deleted: the garbage collector removes its VidraResources through their owner
	// references; each releases its objects as it goes.
	if !ihs.DeletionTimestamp.IsZero() {
		r.sources().forget(ihs.Name)
		return ctrl.Result{}, nil
	}

	// Its Infrahub, or its requester, holds its share of the workers already: looked at
	// again soon, without holding one meanwhile.
	if !ihs.Spec.Suspend {
		release, ok := r.share.Take(ihs.Spec.Source.InfrahubAPIURL, r.PerSourceSyncs, ihs.Annotations[vidrav1alpha1.RequestedByAnnotation], r.PerRequesterSyncs)
		if !ok {
			return ctrl.Result{RequeueAfter: fairshare.Retry(fairshare.BusyRetry)}, nil
		}
		defer release()
	}

	// One span per reconcile: a child of the webhook that asked for it, else a new trace.
	ctx, span := r.startSpan(ctx, ihs)
	defer func() {
		span.SetAttributes(attribute.Int("vidra.artifacts", len(ihs.Status.Artifacts)))
		if ihs.Status.Rollout != nil {
			span.SetAttributes(attribute.Int64("vidra.revision", ihs.Status.Rollout.Revision))
		}
		if retErr != nil {
			span.SetStatus(codes.Error, retErr.Error())
		}
		span.End()
	}()

	// Status is written once, at the end, whatever path is taken.
	before := ihs.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, ihs); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	// Suspended: nothing is listed, written or removed.
	if ihs.Spec.Suspend {
		markSuspended(ihs)
		return ctrl.Result{}, nil
	}
	d := ihs.Spec.Destination
	reach := policy.SyncReach(d.Destination, d.ClusterSelector != nil || d.ClusterFromTarget, ihs.Spec.Template)
	if reason, why, err := r.Guards.SyncRefusal(ctx, r.Hub, "InfrahubSync", ihs, reach); err != nil || why != "" {
		if err != nil {
			return ctrl.Result{}, err
		}
		markStalled(ihs, reason, why)
		r.event(ihs, nil, corev1.EventTypeWarning, reason, why)
		return ctrl.Result{RequeueAfter: admissionguard.Retry}, nil
	}

	start := r.now()
	result, err = r.sync(ctx, ihs)
	r.Metrics.observeSync(r.now().Sub(start))
	return result, err // controller-runtime logs it, with the InfrahubSync's name
}

func (r *Reconciler) patchStatus(ctx context.Context, before, ihs *vidrav1alpha1.InfrahubSync) error {
	ihs.Status.ObservedGeneration = ihs.Generation
	if statusEqual(before.Status, ihs.Status) {
		return nil
	}
	err := r.Hub.Status().Patch(ctx, ihs, client.MergeFrom(before))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch status of InfrahubSync %s: %w", ihs.Name, err)
	}
	r.written.Wrote(ihs)
	return nil
}

// event records an Event on an InfrahubSync, optionally related to one of its
// VidraResources.
func (r *Reconciler) event(ihs *vidrav1alpha1.InfrahubSync, related *vidrav1alpha1.VidraResource, eventType, reason, note string) {
	recorder := events.NewRecorder(r.Recorder, "Sync")
	if related == nil {
		recorder.Record(ihs, nil, eventType, reason, note) // not a typed nil
		return
	}
	recorder.Record(ihs, related, eventType, reason, note)
}
