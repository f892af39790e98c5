package apply

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// known is what the engine knows of an object before writing it: live as the API server
// had it moments ago (nil: absent), or nothing yet (read false). Remembered knowledge is
// older (see Memo): it is written on only with the object's resourceVersion as a
// precondition, and read again rather than forced over.
type known struct {
	read       bool
	remembered bool
	live       *metav1.PartialObjectMetadata
}

// next says what follows one attempt at an object.
type next int

func (e *Engine) applyOne(ctx context.Context, o *unstructured.Unstructured) Result {
	ref, err := e.Ref(o)
	if err != nil {
		return Result{Ref: ref, Action: Failed, Err: err}
	}
	o.SetNamespace(ref.Namespace)
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[vidrav1alpha1.ManagedByLabel] = vidrav1alpha1.ManagedByValue
	o.SetLabels(labels)
	// The owners set is the engine's to declare (see ownership.Stamp), never the bundle's.
	if annotations := o.GetAnnotations(); annotations != nil {
		delete(annotations, vidrav1alpha1.OwnersAnnotation)
		o.SetAnnotations(annotations)
	}

	var declared declaration // what the memo compares: only worth computing with a memo
	if e.Memo != nil {
		declared = digestOf(o)
	}
	if e.Current != nil {
		if rv, ok := e.Current(ref); ok && e.Memo.unchanged(e.Owner, ref, declared, rv) {
			return Result{Ref: ref, Action: Unchanged}
		}
	}
	k := e.known(ref)
	joinOnly := e.JoinOnly != nil && e.JoinOnly(ref)
	if e.Latches != nil {
		joiner := ""
		if joinOnly {
			joiner = e.Owner
		}
		lt, err := e.Latches.acquire(ctx, ref, joiner)
		if err != nil {
			return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("apply %s: %w", ref, err)}
		}
		if lt.last != nil {
			k = known{read: true, live: lt.last}
		}
		defer func() { e.Latches.release(ref, lt, k.present(), joiner) }()
	}
	result := e.applyKnown(ctx, o, ref, &k, joinOnly)
	switch result.Action {
	case Created, Configured, Unchanged, Repaired:
		e.Memo.remember(e.Owner, e.FieldManager(), ref, k.present(), declared)
	default:
		e.Memo.forget(e.Owner, ref) // read again next time: nothing was applied
	}
	return result
}

// applyKnown applies the object from what is known of it, reading it again when it
// changed meanwhile; k is left with what is known of it afterwards.
func (e *Engine) applyKnown(ctx context.Context, o *unstructured.Unstructured, ref inventory.Ref, k *known, joinOnly bool) Result {
	backoff := ownership.ConflictBackoff()
	for backoff.Steps > 0 {
		result, then := e.attempt(ctx, o, ref, k, joinOnly)
		if then == done {
			return result
		}
		pause := backoff.Step()
		if then == contended {
			if err := sleep(ctx, pause); err != nil {
				return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("apply %s: %w", ref, err)}
			}
		}
	}
	*k = known{}
	return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("apply %s: it kept changing while being applied, %d times", ref, ownership.ConflictBackoff().Steps)}
}

// present is the object when it is known to exist, else nil.
func (k known) present() *metav1.PartialObjectMetadata {
	if !k.read || k.remembered {
		return nil
	}
	return k.live
}

// known is what the caller told of the object: read moments ago (Seen), left so by this
// owner's last apply (Memo), or never applied by this owner (Applied), which makes it
// worth creating without a read.
func (e *Engine) known(ref inventory.Ref) known {
	for _, s := range e.Seen {
		if s.GroupVersionKind().GroupKind() == ref.GVK.GroupKind() && s.Namespace == ref.Namespace && s.Name == ref.Name {
			return known{read: true, live: s.DeepCopy()}
		}
	}
	if e.Applied != nil && !e.Applied(ref) {
		return known{read: true}
	}
	if live := e.Memo.recall(e.Owner, e.FieldManager(), ref); live != nil {
		return known{read: true, remembered: true, live: live}
	}
	return known{}
}

// attempt applies the object once: it reads it when nothing is known, creates it when it
// is absent and updates it when it exists.
func (e *Engine) attempt(ctx context.Context, o *unstructured.Unstructured, ref inventory.Ref, k *known, joinOnly bool) (Result, next) {
	if !k.read {
		live, err := e.ownership().Read(ctx, ref)
		if err != nil && !errors.Is(err, ownership.ErrGone) {
			return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("read %s: %w", ref, err)}, done
		}
		*k = known{read: true, live: live}
	}
	if k.remembered && !ownership.AppliesOwners(k.live, e.FieldManager()) {
		k.read = false // no precondition to make the apply on: read it
		return Result{}, again
	}
	if k.live == nil {
		return e.create(ctx, o, ref, k, joinOnly)
	}
	return e.update(ctx, o, ref, k, joinOnly)
}

// create applies an object believed absent, owned by this owner from its first moment.
// If it exists after all, the apply fails without touching it, and it is read.
func (e *Engine) create(ctx context.Context, o *unstructured.Unstructured, ref inventory.Ref, k *known, joinOnly bool) (Result, next) {
	applied := o.DeepCopy()
	manager := e.FieldManager()
	if joinOnly {
		// Created owned by every owner of this process waiting to join it.
		manager = ownership.FieldManager
		ownership.StampNew(applied, e.Owner, e.Latches.joinersOf(ref)...)
	} else {
		ownership.StampNew(applied, e.Owner)
	}
	err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(manager))
	switch {
	case err == nil:
		*k = known{read: true, live: metadataOf(applied)}
		return Result{Ref: ref, Action: Created, Object: applied}, done
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		k.read = false
		return Result{}, again
	default:
		*k = known{}
		return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("apply %s: %w", ref, err)}, done
	}
}

// update applies an object that exists. This owner joins its owners set first when it is
// not in it yet, so the object counts this owner before its fields land.
func (e *Engine) update(ctx context.Context, o *unstructured.Unstructured, ref inventory.Ref, k *known, joinOnly bool) (Result, next) {
	if !k.live.DeletionTimestamp.IsZero() {
		*k = known{}
		return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("apply %s: it is being deleted; it is applied again once gone", ref)}, done
	}
	var others []string
	if joinOnly {
		// The owners of this process waiting to join it join with this one.
		others = e.Latches.joinersOf(ref)
	}
	live, err := e.ownership().ClaimFor(ctx, k.live, e.Owner, others, e.Adopt)
	switch {
	case errors.Is(err, ownership.ErrNotManaged) && joinOnly:
		return Result{Ref: ref, Action: UsedAsItIs}, done
	case errors.Is(err, ownership.ErrNotManaged):
		return Result{Ref: ref, Action: NotManaged,
			Err: fmt.Errorf("%s exists and is not managed by Vidra; set adoptExisting: Always to take it over", ref)}, done
	case errors.Is(err, ownership.ErrGone):
		*k = known{read: true} // deleted since it was read: create it
		return Result{}, again
	case apierrors.IsConflict(err):
		k.read = false
		return Result{}, contended
	case err != nil:
		*k = known{}
		return Result{Ref: ref, Action: Failed, Err: err}, done
	}
	if joinOnly {
		action := Configured
		if live.ResourceVersion == k.live.ResourceVersion {
			action = Unchanged
		}
		*k = known{read: true, live: live}
		return Result{Ref: ref, Action: action, Object: objectOf(live)}, done
	}
	k.live = live

	applied := o.DeepCopy()
	ownership.Stamp(applied, live, e.FieldManager())
	action, conflicts, err := e.serverSideApply(ctx, applied, live.ResourceVersion, !k.remembered)
	switch {
	case errors.Is(err, errStale) && k.remembered:
		k.read = false // it changed since this owner left it: no race, read it now
		return Result{}, again
	case errors.Is(err, errStale):
		k.read = false
		return Result{}, contended
	case err != nil:
		*k = known{}
		return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("apply %s: %w", ref, err)}, done
	case action == Conflicted:
		*k = known{} // refused: the next apply reads it rather than remember it
		return Result{Ref: ref, Action: action, Conflicts: conflicts}, done
	}
	*k = known{read: true, live: metadataOf(applied)}
	return Result{Ref: ref, Action: action, Conflicts: conflicts, Object: applied}, done
}

// errStale: the object changed (or went) since it was read; it is read again.
var errStale = errors.New("the object changed since it was read")

// serverSideApply applies without forcing. A conflict with field managers that are not
// Vidra owners is drift and is repaired by a forced apply; a conflict with another Vidra
// owner is reported and those fields are left alone. before is the object's
// resourceVersion as known (fresh: read moments ago, else remembered, and any conflict
// sends it to be read); applied receives the object as the API server returns it.
func (e *Engine) serverSideApply(ctx context.Context, applied *unstructured.Unstructured, before string, fresh bool) (Action, []Conflict, error) {
	request := applied.DeepCopy()
	err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(e.FieldManager()))
	if err == nil {
		if applied.GetResourceVersion() == before {
			return Unchanged, nil, nil
		}
		return Configured, nil, nil
	}
	if !apierrors.IsConflict(err) {
		return "", nil, err
	}
	conflicts := conflictsOf(err)
	if !fresh || len(conflicts) == 0 || slices.ContainsFunc(conflicts, func(c Conflict) bool { return ownership.IsOwnersField(c.Field) }) {
		// A precondition failed, or the owners set declared was changed meanwhile.
		return "", nil, fmt.Errorf("%w: %w", errStale, err)
	}
	if withVidra := vidraConflicts(conflicts); len(withVidra) > 0 {
		return Conflicted, withVidra, nil
	}
	// Forced only over the object as it was read: what changed since is looked at again.
	request.SetResourceVersion(before)
	if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(request), client.FieldOwner(e.FieldManager()), client.ForceOwnership); err != nil {
		if apierrors.IsConflict(err) {
			return "", nil, fmt.Errorf("%w: %w", errStale, err)
		}
		return "", nil, err
	}
	request.DeepCopyInto(applied)
	return Repaired, conflicts, nil
}

// objectOf is the object's metadata as an object (enough to judge a Namespace's health).
func objectOf(m *metav1.PartialObjectMetadata) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(m.GroupVersionKind())
	u.SetNamespace(m.Namespace)
	u.SetName(m.Name)
	u.SetUID(m.UID)
	u.SetResourceVersion(m.ResourceVersion)
	u.SetGeneration(m.Generation)
	u.SetLabels(m.Labels)
	u.SetAnnotations(m.Annotations)
	u.SetDeletionTimestamp(m.DeletionTimestamp)
	return u
}

// digestOf is a digest of what the object declares (none if it cannot be encoded).
func digestOf(o *unstructured.Unstructured) declaration {
	data, err := json.Marshal(o.Object)
	if err != nil {
		return declaration{}
	}
	sum := sha256.Sum256(data)
	return declaration(sum[:len(declaration{})])
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
