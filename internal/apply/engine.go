// Package apply is Vidra's apply engine: it server-side applies a bundle of objects to one
// cluster for one owner, in stages (CRDs and Namespaces first, waiting for CRDs to be
// established, then everything else), keeps the owners set of every object (package
// ownership), repairs drift made by anyone but another Vidra owner, and reports — instead
// of forcing — fields that another Vidra owner declares differently, so a shared object
// never flip-flops between owners.
//
// fluxcd/pkg/ssa supplies the staging, ordering and formatting helpers; its Apply is not
// used because it always forces field ownership, which would flip-flop shared fields.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/ownership"
)

// FieldManagerPrefix starts the field manager name of every Vidra owner, so that an apply
// conflict with another Vidra owner is told apart from drift made by someone else.
const FieldManagerPrefix = "vidra:"

// Action is what applying one object did.
type Action string

// Actions.
const (
	Created    Action = "Created"
	Configured Action = "Configured"
	Unchanged  Action = "Unchanged"
	// Repaired: fields changed by another field manager were set back (drift).
	Repaired Action = "Repaired"
	// Conflicted: another Vidra owner declares some fields differently; those fields were
	// left as they are, and Conflicts lists them.
	Conflicted Action = "Conflicted"
	// NotManaged: the object exists and Vidra does not manage it; it was left untouched.
	NotManaged Action = "NotManaged"
	// Failed: see Err.
	Failed Action = "Failed"
)

// Result is what happened to one object.
type Result struct {
	Ref       ownership.Ref
	Action    Action
	Conflicts []Conflict
	Err       error
}

// Engine applies bundles for one owner to one cluster.
type Engine struct {
	// Client talks to the destination cluster, reading from the API server (not a cache)
	// with the destination's own REST mapping.
	Client client.Client
	// Owner is the owner's ID in owners sets ("<hub-id>/<VidraResource name>").
	Owner string
	// Adopt takes over existing objects that Vidra does not manage.
	Adopt bool
	// DefaultNamespace is given to namespaced objects that name none.
	DefaultNamespace string
	// CRDTimeout bounds the wait for applied CRDs to be established (30s).
	CRDTimeout time.Duration
}

// FieldManager is the owner's field manager: the prefix and the owner ID, hashed when too
// long for the API server's 128 characters.
func (e *Engine) FieldManager() string {
	name := FieldManagerPrefix + e.Owner
	if len(name) <= 128 {
		return name
	}
	sum := sha256.Sum256([]byte(e.Owner))
	return name[:128-17] + "-" + hex.EncodeToString(sum[:8])
}

func (e *Engine) ownership() ownership.Writer {
	return ownership.Writer{Client: e.Client}
}

// Apply applies the objects in stages and returns one Result per object, in apply order.
// Objects are labeled managed-by Vidra; the owners set is kept apart from the applied
// fields. A failed stage stops the later ones (their objects are not in the results).
func (e *Engine) Apply(ctx context.Context, objects []*unstructured.Unstructured) ([]Result, error) {
	var definitions, rest []*unstructured.Unstructured
	for _, o := range objects {
		o = o.DeepCopy()
		if ssautils.IsClusterDefinition(o) {
			definitions = append(definitions, o)
		} else {
			rest = append(rest, o)
		}
	}
	sortForApply(definitions)
	sortForApply(rest)

	results := e.applyStage(ctx, definitions)
	if err := firstError(results); err != nil {
		return results, err
	}
	if err := e.waitForCRDs(ctx, definitions); err != nil {
		return results, err
	}
	results = append(results, e.applyStage(ctx, rest)...)
	return results, firstError(results)
}

func (e *Engine) applyStage(ctx context.Context, objects []*unstructured.Unstructured) []Result {
	results := make([]Result, 0, len(objects))
	for _, o := range objects {
		results = append(results, e.applyOne(ctx, o))
	}
	return results
}

func firstError(results []Result) error {
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	return errors.Join(errs...)
}

// Ref returns the reference of an object as it will be applied: namespaced objects without
// a namespace get the default one. It needs the kind's REST mapping.
func (e *Engine) Ref(o *unstructured.Unstructured) (ownership.Ref, error) {
	ref := ownership.Ref{GVK: o.GroupVersionKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
	namespaced, err := e.Client.IsObjectNamespaced(o)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return ref, fmt.Errorf("kind %s is not served by the cluster: %w", o.GroupVersionKind(), err)
		}
		return ref, fmt.Errorf("map %s: %w", ssautils.FmtUnstructured(o), err)
	}
	switch {
	case !namespaced:
		ref.Namespace = ""
	case ref.Namespace == "":
		if e.DefaultNamespace == "" {
			return ref, fmt.Errorf("%s %s is namespaced and names no namespace, and the destination gives none", ref.GVK.Kind, ref.Name)
		}
		ref.Namespace = e.DefaultNamespace
	}
	return ref, nil
}

// maxReapply bounds how often an object another owner prunes while it is being created
// is applied again.
const maxReapply = 3

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
	// The owners set is written apart (optimistically), never through an owner's apply.
	if annotations := o.GetAnnotations(); annotations != nil {
		delete(annotations, vidrav1alpha1.OwnersAnnotation)
		o.SetAnnotations(annotations)
	}

	for range maxReapply {
		// Join first when the object exists, so it counts this owner before its fields land.
		existed := true
		before, err := e.ownership().Join(ctx, ref, e.Owner, e.Adopt)
		switch {
		case errors.Is(err, ownership.ErrNotManaged):
			return Result{Ref: ref, Action: NotManaged,
				Err: fmt.Errorf("%s exists and is not managed by Vidra; set adoptExisting: Always to take it over", ref)}
		case errors.Is(err, ownership.ErrGone):
			existed = false
		case err != nil:
			return Result{Ref: ref, Action: Failed, Err: err}
		}

		action, conflicts, err := e.serverSideApply(ctx, o, before)
		if err != nil {
			return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("apply %s: %w", ref, err)}
		}
		if !existed {
			action = Created
			// Created by this apply: now join. Another owner may have pruned it in between;
			// then it is applied again.
			if _, err := e.ownership().Join(ctx, ref, e.Owner, e.Adopt); errors.Is(err, ownership.ErrGone) {
				continue
			} else if err != nil {
				return Result{Ref: ref, Action: Failed, Err: err}
			}
		}
		return Result{Ref: ref, Action: action, Conflicts: conflicts}
	}
	return Result{Ref: ref, Action: Failed, Err: fmt.Errorf("apply %s: deleted by another owner while being created, %d times", ref, maxReapply)}
}

// serverSideApply applies without forcing. A conflict with field managers that are not
// Vidra owners is drift and is repaired by a forced apply; a conflict with another Vidra
// owner is reported and those fields are left alone.
// before is the object's resourceVersion ahead of the apply, empty when it did not exist.
func (e *Engine) serverSideApply(ctx context.Context, o *unstructured.Unstructured, before string) (Action, []Conflict, error) {
	applied := o.DeepCopy()
	err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(e.FieldManager()))
	if err == nil {
		if before != "" && applied.GetResourceVersion() == before {
			return Unchanged, nil, nil
		}
		return Configured, nil, nil
	}
	if !apierrors.IsConflict(err) {
		return "", nil, err
	}
	conflicts := conflictsOf(err)
	if len(conflicts) == 0 {
		return "", nil, err
	}
	if withVidra := vidraConflicts(conflicts); len(withVidra) > 0 {
		return Conflicted, withVidra, nil
	}
	applied = o.DeepCopy()
	if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(e.FieldManager()), client.ForceOwnership); err != nil {
		return "", nil, err
	}
	return Repaired, conflicts, nil
}

// sortForApply orders objects the way they are applied: by kind (flux's order, which
// puts Namespaces, CRDs and other cluster definitions first), keeping the bundle's order
// within a kind.
func sortForApply(objects []*unstructured.Unstructured) {
	sort.Stable(ssa.SortableUnstructureds(objects))
}
