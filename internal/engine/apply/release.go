package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// Release lets go of objects the owner no longer declares, in the reverse of apply order
// (so Namespaces and CRDs go last). Each object loses this owner from its owners set; the
// last owner deletes it (prune) or leaves it unmanaged. Where other owners remain, this
// owner also gives up its fields, so what stays is what the remaining owners declare.
func (e *Engine) Release(ctx context.Context, refs []inventory.Ref, prune bool) ([]Result, error) {
	ordered := make([]*unstructured.Unstructured, 0, len(refs))
	for _, r := range refs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(r.GVK)
		u.SetNamespace(r.Namespace)
		u.SetName(r.Name)
		ordered = append(ordered, u)
	}
	sortForApply(ordered)
	slices.Reverse(ordered)

	results := make([]Result, 0, len(ordered))
	var errs []error
	for _, u := range ordered {
		ref := inventory.Ref{GVK: u.GroupVersionKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
		result := e.releaseOne(ctx, ref, prune)
		if result.Err != nil {
			errs = append(errs, result.Err)
		}
		results = append(results, result)
	}
	return results, errors.Join(errs...)
}

// Released actions.
const (
	// Deleted: the last owner left and the object was deleted.
	Deleted Action = "Deleted"
	// Released: the object stays; this owner no longer owns it.
	Released Action = "Released"
)

func (e *Engine) releaseOne(ctx context.Context, ref inventory.Ref, prune bool) Result {
	e.Memo.forget(e.Owner, ref)
	outcome, err := e.ownership().Leave(ctx, ref, e.Owner, prune)
	if err != nil {
		return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("release %s: %w", ref, err)}
	}
	switch outcome {
	case ownership.Deleted:
		return Result{Ref: ref, Action: Deleted}
	case ownership.Released, ownership.NotOwned:
		return Result{Ref: ref, Action: Released}
	}
	if err := e.giveUpFields(ctx, ref); err != nil {
		return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("give up fields of %s: %w", ref, err)}
	}
	return Result{Ref: ref, Action: Released}
}

// giveUpFields applies an empty configuration as this owner, which drops every field only
// this owner set. The object's UID and resourceVersion ride along as preconditions: an
// apply with a resourceVersion alone would create a deleted object again, empty; with
// the UID the API server refuses to. An object that other owners keep writing is read
// again after a pause.
func (e *Engine) giveUpFields(ctx context.Context, ref inventory.Ref) error {
	backoff := ownership.ConflictBackoff()
	for backoff.Steps > 0 {
		current, err := e.ownership().Read(ctx, ref)
		if errors.Is(err, ownership.ErrGone) {
			return nil
		}
		if err != nil {
			return err
		}
		empty := &unstructured.Unstructured{}
		empty.SetGroupVersionKind(ref.GVK)
		empty.SetNamespace(ref.Namespace)
		empty.SetName(ref.Name)
		empty.SetUID(current.UID)
		empty.SetResourceVersion(current.ResourceVersion)
		err = e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(empty), client.FieldOwner(e.FieldManager()), client.ForceOwnership)
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		if err := sleep(ctx, backoff.Step()); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s kept changing", ref)
}
