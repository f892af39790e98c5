package infrahubsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/runtime/events"
	"github.com/vidra-operator/vidra/internal/runtime/tracing"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// Read connects to the sync's Infrahub and lists its artifacts, within the operator's
// bounds, so no Infrahub can take the memory every sync shares. A failed listing, or one
// over the bounds, delivers and removes nothing.
func (k *Kind) Read(ctx context.Context, obj syncs.Object) (syncs.Read, error) {
	ihs := obj.(*vidrav1alpha1.InfrahubSync)
	c, err := k.sources().clientFor(ctx, ihs)
	if err != nil {
		return nil, sourceFailure(err)
	}
	at, err := infrahub.At(ihs.Spec.Source.TargetDate, k.now())
	if err != nil {
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: err}
	}
	snap := infrahub.Snapshot{Branch: ihs.Branch(), At: at}
	quota := infrahub.NewQuota(k.Limits, time.Now())
	listed, err := k.list(ctx, c, snap, ihs, quota)
	if err != nil {
		quota.Close()
		return nil, listFailure(err)
	}
	now := metav1.NewTime(k.now())
	ihs.Status.LastSyncTime = &now
	return &listing{
		artifacts: artifacts{client: c, snap: snap, metrics: k.Metrics, quota: quota},
		kind:      k, ihs: ihs, listed: listed,
	}, nil
}

// listing is what one listing of Infrahub delivers.
type listing struct {
	artifacts
	kind   *Kind
	ihs    *vidrav1alpha1.InfrahubSync
	listed []infrahub.Artifact
}

// Withheld: Infrahub listed nothing, and the sync does not let an empty listing remove
// what it made.
func (l *listing) Withheld(owned int) (string, string) {
	if len(l.listed) > 0 || l.ihs.Spec.AllowEmpty {
		return "", ""
	}
	return vidrav1alpha1.ReasonNoArtifacts, fmt.Sprintf("Infrahub lists no artifact named %q on branch %s; the %d VidraResources made before are kept (set spec.allowEmpty: true to let an empty listing remove them)",
		l.ihs.Spec.Source.ArtefactName, l.ihs.Branch(), owned)
}

// Items are the listed artifacts.
func (l *listing) Items(context.Context, *fanout.Delivery, []fanout.Target, map[string]vidrav1alpha1.BundleStatus) []fanout.Item {
	return itemsOf(l.listed)
}

// Record writes the artifacts delivered to status, with an Event for each that left
// Infrahub. A sync that went over one of the operator's bounds while downloading is
// Stalled: what it could not download keeps what it delivered, and retrying sooner cannot
// help.
func (l *listing) Record(delivered []vidrav1alpha1.BundleStatus, rollout *vidrav1alpha1.RolloutStatus, previous map[string]vidrav1alpha1.BundleStatus) (string, error) {
	if rollout != nil {
		l.ihs.Status.Rollout = rollout
	}
	l.kind.eventRemoved(l.ihs, l.listed, previous)
	setArtifacts(l.ihs, delivered)
	if over := l.quota.Exceeded(); over != nil {
		return "", overLimit(over, over.Error()+"; the artifacts not downloaded keep what they delivered")
	}
	return syncs.Counted(len(l.ihs.Status.Artifacts), "artifact"), nil
}

// Close returns the memory the listing's downloads held.
func (l *listing) Close() { l.quota.Close() }

// setArtifacts records the artifacts of a successful listing and their delivered
// checksums.
func setArtifacts(ihs *vidrav1alpha1.InfrahubSync, artifacts []vidrav1alpha1.BundleStatus) {
	ihs.Status.Artifacts = artifacts
	ihs.Status.Checksums = nil
	for _, a := range artifacts {
		if a.Checksum != "" {
			ihs.Status.Checksums = append(ihs.Status.Checksums, a.Checksum)
		}
	}
}

// sourceFailure says what an error reaching the sync's Infrahub means: one unusable as
// written (a URL, a Secret, a right refused) waits for a change, as a Secret or a right
// may be created or fixed without the InfrahubSync changing; another is retried with
// backoff.
func sourceFailure(err error) error {
	var srcErr *sourceError
	var refusal *credentials.Refusal
	switch {
	case errors.As(err, &refusal):
		return &syncs.Failure{Reason: refusal.Reason, Stalled: true, Err: err}
	case errors.As(err, &srcErr):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: err}
	}
	return &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Transient: true, Err: err}
}

func (k *Kind) list(ctx context.Context, c *infrahub.Client, snap infrahub.Snapshot, ihs *vidrav1alpha1.InfrahubSync, quota *infrahub.Quota) ([]infrahub.Artifact, error) {
	ctx, span := tracing.Tracer().Start(ctx, "infrahub.list", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("infrahub.branch", snap.Branch)))
	defer span.End()
	var listed []infrahub.Artifact
	var err error
	if q := ihs.Spec.Source.QueryName; q != "" {
		listed, err = c.ListArtifactsByQuery(ctx, snap, q, ihs.Spec.Source.ArtefactName, quota)
	} else {
		listed, err = c.ListArtifacts(ctx, snap, ihs.Spec.Source.ArtefactName, quota)
	}
	span.SetAttributes(attribute.Int("infrahub.artifacts", len(listed)))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return listed, err
}

// listFailure says what a listing that failed means: refused credentials wait for the
// interval, as a retry cannot help until they change, and so does a listing over the
// operator's bounds, which stalls the sync; another error is retried with backoff.
func listFailure(err error) error {
	if lim, ok := infrahub.AsLimitError(err); ok {
		return overLimit(lim, err.Error())
	}
	if infrahub.IsAuthError(err) {
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonAuthenticationFailed, Err: err}
	}
	return &syncs.Failure{Reason: vidrav1alpha1.ReasonListFailed, Transient: true, Err: err}
}

// eventRemoved records an Event for each artifact that left the listing, the first
// fanout.MaxItemEvents of them one by one and the rest in one Event: a thousand artifacts
// gone at once (a branch merged, a site decommissioned) cost the hub a dozen writes.
func (k *Kind) eventRemoved(ihs *vidrav1alpha1.InfrahubSync, listed []infrahub.Artifact, previous map[string]vidrav1alpha1.BundleStatus) {
	isListed := map[string]bool{}
	for _, a := range listed {
		isListed[a.ID] = true
	}
	var folded []string
	recorded := 0
	for _, id := range slices.Sorted(maps.Keys(previous)) {
		st := previous[id]
		if isListed[id] {
			continue
		}
		if recorded == fanout.MaxItemEvents {
			folded = append(folded, fanout.ItemName(st.Name, st.Target))
			continue
		}
		recorded++
		var related *vidrav1alpha1.VidraResource
		if len(st.VidraResources) > 0 {
			related = &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: st.VidraResources[0]}}
		}
		removed := strings.Join(st.VidraResources, ", ")
		if n := int(st.VidraResourceCount); n > len(st.VidraResources) {
			removed = fmt.Sprintf("%d VidraResources (%s, …)", n, removed)
		}
		k.event(ihs, related, corev1.EventTypeNormal, vidrav1alpha1.EventArtifactRemoved,
			fmt.Sprintf("artifact %s (%s, target %s) is no longer in Infrahub: removed %s", st.Name, id, st.Target, removed))
	}
	if len(folded) > 0 {
		k.event(ihs, nil, corev1.EventTypeNormal, vidrav1alpha1.EventArtifactRemoved,
			fanout.SummingUp("artifact", "no longer in Infrahub, their VidraResources removed", folded))
	}
}

// event records an Event on an InfrahubSync, optionally related to one of its
// VidraResources.
func (k *Kind) event(ihs *vidrav1alpha1.InfrahubSync, related *vidrav1alpha1.VidraResource, eventType, reason, note string) {
	recorder := events.NewRecorder(k.Recorder, "Sync")
	if related == nil {
		recorder.Record(ihs, nil, eventType, reason, note) // not a typed nil
		return
	}
	recorder.Record(ihs, related, eventType, reason, note)
}
