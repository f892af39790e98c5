package syncs

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fanout"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// Object is a sync of any kind.
type Object interface {
	vidrav1alpha1.Sync
	client.Object
}

// Kind is what one kind of sync brings to the reconciler: how its spec and status read,
// and how its source is read. Everything else — the fair share of workers, the admission
// guards, tracing, the fan-out, the conditions and the one status write — is the
// reconciler's, the same for every kind.
type Kind interface {
	// SyncKind names the kind.
	SyncKind() vidrav1alpha1.SyncKind
	// Spec is what the reconciler reads of obj's spec.
	Spec(obj Object) Spec
	// Status is obj's status, which the reconciler compares and writes once per
	// reconcile; observed is its observedGeneration.
	Status(obj Object) (status any, observed *int64)
	// Mirror writes what obj's status shows beside its conditions, from them: the
	// original Vidra's syncState and lastError, a source's message.
	Mirror(obj Object)
	// Read asks obj's source what obj delivers now, and records what it read in obj's
	// status. On an error (a *Failure says what it means for the sync), the Read
	// returned, when not nil, delivers what obj delivered before: a failed read never
	// prunes, and a rollout goes on with what it has.
	Read(ctx context.Context, obj Object) (Read, error)
	// Forget drops what the kind keeps for the sync of this name, which is gone.
	Forget(name string)
	// Transient says whether an error of the kind's own (its source's) may pass on its
	// own, beyond the hub's that every kind shares.
	Transient(err error) bool
}

// Read is what a sync's source held at one reconcile, as the fan-out delivers it.
type Read interface {
	// Source gives the fan-out each item's content.
	fanout.Source
	// Withheld says why nothing is delivered or removed, when so ("" delivers): an
	// Infrahub that lists nothing, say, which an empty answer must not prune. owned is
	// how many VidraResources the sync has.
	Withheld(owned int) (reason, message string)
	// Items are what the sync delivers to the targets: one item for every target, or
	// one for each target when the kind builds a bundle for each; previous are the
	// bundles its status lists, by ID.
	Items(ctx context.Context, d *fanout.Delivery, targets []fanout.Target, previous map[string]vidrav1alpha1.BundleStatus) []fanout.Item
	// Record writes what was delivered to the sync's status, and says what it was, for
	// the Ready message; or what the kind found wrong beside the fan-out (a bound
	// crossed, destinations whose bundle could not be built), which it reports first.
	Record(bundles []vidrav1alpha1.BundleStatus, rollout *vidrav1alpha1.RolloutStatus, previous map[string]vidrav1alpha1.BundleStatus) (delivered string, err error)
	// Close releases what the read holds (memory reserved for its downloads).
	Close()
}

// Spec is what the reconciler reads of a sync's spec, whatever its kind.
type Spec struct {
	// Interval is how often its source is read (a minute when unset).
	Interval time.Duration
	// Reach is where it delivers, as the admission guards judge it.
	Reach policy.Reach
	// Delivery is the sync as its fan-out sees it.
	Delivery fanout.Sync
}

// Failure is why a source gave nothing to deliver, as the sync's conditions say it.
type Failure struct {
	// Reason is the Ready condition's reason.
	Reason string
	// Stalled: only a change of the sync or of its Secrets can help.
	Stalled bool
	// Transient: it may pass on its own, and is retried with backoff; otherwise the sync
	// is looked at again at its interval.
	Transient bool
	// RetryAfter, when set, is how long a build that failed so is not tried again (a
	// build failure stands for good otherwise, Transient ones not at all).
	RetryAfter time.Duration
	Err        error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Metrics count what the syncs of one kind do.
type Metrics interface {
	// ObserveSync counts one sync and how long it took.
	ObserveSync(d time.Duration)
	// ObserveWave counts a wave of a progressive rollout that ended, by result.
	ObserveWave(result string)
}
