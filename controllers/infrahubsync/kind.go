// Package infrahubsync is the InfrahubSync kind as the one sync reconciler (package
// syncs) reads it: it lists the artifacts of one name in Infrahub, and hands the fan-out
// each artifact, downloaded only when its checksum changed, for one VidraResource per
// artifact and destination cluster; those whose artifact or cluster is gone are removed.
// It also receives Infrahub's signed webhooks, which ask for a sync at once.
package infrahubsync

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	k8sevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// Kind is the InfrahubSync kind, as the sync reconciler reads it.
type Kind struct {
	// Hub asks the API server whether a sync's requester may use the Secrets it names.
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
	// Recorder records the Events of artifacts that left Infrahub.
	Recorder k8sevents.EventRecorder
	// Metrics, when set, count requests and downloads.
	Metrics *Metrics
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	sourcesOnce sync.Once
	srcs        *sources
}

var _ syncs.Kind = (*Kind)(nil)

func (k *Kind) sources() *sources {
	k.sourcesOnce.Do(func() {
		k.srcs = &sources{
			reader: k.HubReader, gate: credentials.NewGate(k.HubReader, k.Hub, k.Namespace),
			timeout: k.HTTPTimeout, observe: k.Metrics.observeRequest,
		}
	})
	return k.srcs
}

func (k *Kind) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// SyncKind names the kind.
func (k *Kind) SyncKind() vidrav1alpha1.SyncKind { return vidrav1alpha1.LookupSyncKind("InfrahubSync") }

// Spec is what the reconciler reads of the InfrahubSync's spec.
func (k *Kind) Spec(obj syncs.Object) syncs.Spec {
	ihs := obj.(*vidrav1alpha1.InfrahubSync)
	d := ihs.Spec.Destination
	spec := syncs.Spec{
		Reach: policy.SyncReach(d.Destination, d.ClusterSelector != nil || d.ClusterFromTarget, ihs.Spec.Template),
		Delivery: fanout.Sync{
			Object: ihs, SourceName: "Infrahub", Noun: "artifact", Template: ihs.Spec.Template,
			Destination: fanout.Destination{Destination: d.Destination, ClusterSelector: d.ClusterSelector, ByItem: d.ClusterFromTarget},
		},
	}
	if ihs.Spec.Interval != nil {
		spec.Interval = ihs.Spec.Interval.Duration
	}
	return spec
}

// Status is the InfrahubSync's status.
func (k *Kind) Status(obj syncs.Object) (any, *int64) {
	status := &obj.(*vidrav1alpha1.InfrahubSync).Status
	return status, &status.ObservedGeneration
}

// Mirror writes syncState and lastError, which users of the original Vidra read, from
// the conditions.
func (k *Kind) Mirror(obj syncs.Object) {
	status := &obj.(*vidrav1alpha1.InfrahubSync).Status
	state, lastError, keep, ok := syncs.Outcome(obj)
	if !ok {
		return
	}
	status.SyncState = state
	if !keep {
		status.LastError = lastError
	}
}

// Forget drops the client of an InfrahubSync that is gone.
func (k *Kind) Forget(name string) { k.sources().forget(name) }

// Transient reports whether an error of Infrahub's may pass on its own: the network, a
// timeout, a server error or a throttle.
func (k *Kind) Transient(err error) bool {
	var apiErr *infrahub.APIError
	var netErr net.Error
	switch {
	case errors.As(err, &apiErr):
		return apiErr.Status >= http.StatusInternalServerError || apiErr.Status == http.StatusTooManyRequests
	case errors.As(err, &netErr), errors.Is(err, infrahub.ErrStalled):
		return true
	}
	return false
}
