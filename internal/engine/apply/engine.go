// Package apply is Vidra's apply engine: it server-side applies a bundle of objects to one
// cluster for one owner, in stages (CRDs and Namespaces first, waiting for CRDs to be
// established, then what the bundle marks to come first, everything else, and what it
// marks to come last: vidrav1alpha1.ApplyPhaseAnnotation), keeps the owners set of every object (package
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
	"sync"
	"time"

	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
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
	// UsedAsItIs: a join-only object (see Engine.JoinOnly) that exists and that Vidra does
	// not manage; it was left untouched, and is no error: the bundle only needs it there.
	UsedAsItIs Action = "UsedAsItIs"
	// Failed: see Err.
	Failed Action = "Failed"
)

// Changes says whether the action changed the object on its cluster (created, updated,
// repaired, deleted, released...), as against leaving it or failing.
func (a Action) Changes() bool {
	switch a {
	case Unchanged, UsedAsItIs, Failed, NotManaged, Conflicted:
		return false
	}
	return true
}

// Result is what happened to one object.
type Result struct {
	Ref       inventory.Ref
	Action    Action
	Conflicts []Conflict
	Err       error
	// Object is the object as the API server returned it from the apply (nil when it was
	// not applied): fresh enough to judge its health without reading it again.
	Object *unstructured.Unstructured
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
	// Applied, when set, says whether this owner applied an object before (it is in its
	// inventory). One it did not is created at once, without a read first: one request.
	// If it exists after all, that create fails without touching it, and it is read and
	// applied as any existing object.
	Applied func(inventory.Ref) bool
	// Seen are objects read moments ago, which are not read again. A stale one costs a
	// retry, never a wrong write: every write is conditional on what it was decided on.
	Seen []*metav1.PartialObjectMetadata
	// Latches, when set, make the engines of one process that apply the same object to
	// the cluster take turns (see Latches).
	Latches *Latches
	// JoinOnly, when set, names objects this owner only joins: it creates them when
	// missing, as the owners-set manager, and otherwise only enters their owners set,
	// declaring none of their fields (the destination namespace a bundle does not declare).
	// Their fields and their managed fields then do not grow with every owner.
	JoinOnly func(inventory.Ref) bool
	// Current, when set, gives the resourceVersion an object has now as a watch cache
	// sees it (false: unknown). An object this owner's last apply left at that version,
	// declaring what it declares now, is not applied again: nothing would change. A
	// change the cache has not seen yet is repaired when the watch reports it.
	Current func(inventory.Ref) (resourceVersion string, ok bool)
	// Memo, when set, remembers objects as this owner's applies left them, so the next
	// apply need not read them first (see Memo).
	Memo *Memo
	// Parallelism is how many objects of one kind are applied at once (1 when unset).
	// Kinds still follow one another in apply order: a Pod's ServiceAccount exists
	// before the Pod is applied.
	Parallelism int

	// scopes remembers whether each kind is namespaced: asking the REST mapper costs more
	// than the rest of preparing an object, once per object of a bundle.
	scopes sync.Map // schema.GroupVersionKind -> bool
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
// Objects are labeled managed-by Vidra and joined to their owners set (package
// ownership) before, or as, their fields land. A failed stage stops the later ones
// (their objects are not in the results).
func (e *Engine) Apply(ctx context.Context, objects []*unstructured.Unstructured) ([]Result, error) {
	var definitions, pre, rest, post []*unstructured.Unstructured
	for _, o := range objects {
		o = o.DeepCopy()
		switch {
		case ssautils.IsClusterDefinition(o):
			definitions = append(definitions, o)
		case o.GetAnnotations()[vidrav1alpha1.ApplyPhaseAnnotation] == vidrav1alpha1.ApplyPhasePre:
			pre = append(pre, o)
		case o.GetAnnotations()[vidrav1alpha1.ApplyPhaseAnnotation] == vidrav1alpha1.ApplyPhasePost:
			post = append(post, o)
		default:
			rest = append(rest, o)
		}
	}
	sortForApply(definitions)

	results := e.applyStage(ctx, definitions)
	if err := firstError(results); err != nil {
		return results, err
	}
	if err := e.waitForCRDs(ctx, definitions, results); err != nil {
		return results, err
	}
	// Then the objects a bundle asks to come first (a chart's pre-install hooks), the
	// others, and those it asks to come last: each stage only once the one before applied.
	for _, stage := range [][]*unstructured.Unstructured{pre, rest, post} {
		sortForApply(stage)
		results = append(results, e.applyStage(ctx, stage)...)
		if err := firstError(results); err != nil {
			return results, err
		}
	}
	return results, nil
}

func (e *Engine) applyStage(ctx context.Context, objects []*unstructured.Unstructured) []Result {
	results := make([]Result, len(objects))
	// Objects are sorted by kind: each run of one kind is applied at once, up to
	// Parallelism objects at a time.
	for start := 0; start < len(objects); {
		end := start + 1
		kind := objects[start].GroupVersionKind().GroupKind()
		for end < len(objects) && objects[end].GroupVersionKind().GroupKind() == kind {
			end++
		}
		e.applyRun(ctx, objects[start:end], results[start:end])
		start = end
	}
	return results
}

// applyGuarded is applyOne on a goroutine of its own: a panic there would end the
// process, not the reconcile, so it becomes the object's failure.
func (e *Engine) applyGuarded(ctx context.Context, o *unstructured.Unstructured) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = Result{Ref: inventory.Ref{GVK: o.GroupVersionKind(), Namespace: o.GetNamespace(), Name: o.GetName()},
				Action: Failed, Err: fmt.Errorf("apply %s: panic: %v", ssautils.FmtUnstructured(o), p)}
		}
	}()
	return e.applyOne(ctx, o)
}

// applyRun applies objects, up to Parallelism at once, writing results in their order.
func (e *Engine) applyRun(ctx context.Context, objects []*unstructured.Unstructured, results []Result) {
	workers := min(max(e.Parallelism, 1), len(objects))
	if workers == 1 {
		for i, o := range objects {
			results[i] = e.applyOne(ctx, o)
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				results[i] = e.applyGuarded(ctx, objects[i])
			}
		})
	}
	for i := range objects {
		next <- i
	}
	close(next)
	wg.Wait()
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
func (e *Engine) Ref(o *unstructured.Unstructured) (inventory.Ref, error) {
	ref := inventory.Ref{GVK: o.GroupVersionKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
	namespaced, err := e.isNamespaced(o, ref.GVK)
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

// isNamespaced asks the REST mapper once per kind; a kind it does not know yet (a CRD
// being established) is asked again next time.
func (e *Engine) isNamespaced(o *unstructured.Unstructured, gvk schema.GroupVersionKind) (bool, error) {
	if namespaced, ok := e.scopes.Load(gvk); ok {
		return namespaced.(bool), nil
	}
	namespaced, err := e.Client.IsObjectNamespaced(o)
	if err != nil {
		return false, err
	}
	e.scopes.Store(gvk, namespaced)
	return namespaced, nil
}

const (
	done      next = iota
	again          // at once, with what was learnt (it exists, or it is gone)
	contended      // after a pause: it changed between being read and being written
)

// sortForApply orders objects the way they are applied: by kind (flux's order, which
// puts Namespaces, CRDs and other cluster definitions first), keeping the bundle's order
// within a kind.
func sortForApply(objects []*unstructured.Unstructured) {
	sort.Stable(ssa.SortableUnstructureds(objects))
}
