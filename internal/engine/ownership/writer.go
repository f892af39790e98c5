package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
)

// FieldManager is the field manager of owners-set writes, apart from every owner's own.
const FieldManager = "vidra-owners"

// Errors of Join.
var (
	// ErrNotManaged: the object exists, Vidra does not manage it, and adoption was not
	// asked for. It is left untouched.
	ErrNotManaged = errors.New("the object exists and is not managed by Vidra")
	// ErrGone: the object does not exist (any more); the caller applies it again.
	ErrGone = errors.New("the object does not exist")
)

// metaOf is the object's metadata to read or write, naming it.
func metaOf(r inventory.Ref) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(r.GVK)
	m.Namespace, m.Name = r.Namespace, r.Name
	return m
}

// Outcome of Leave.
type Outcome int

// Outcomes of Leave.
const (
	// StillOwned: other owners remain; the object stays.
	StillOwned Outcome = iota
	// Deleted: the last owner left and the object was deleted (or was already gone).
	Deleted
	// Released: the last owner left without pruning; Vidra's marks were removed and the
	// object stays, unmanaged.
	Released
	// NotOwned: the owner was not in the set; nothing was changed. An object that Vidra
	// does not manage is never deleted.
	NotOwned
)

// Writer changes owners sets on one cluster. Its client must read from the API server,
// not a cache: every decision is made on the object's current resourceVersion.
type Writer struct {
	Client client.Client
}

// ConflictBackoff paces the attempts at one object that lost a race (it changed between
// being read and being written): several owners of one object may write it at once, so
// it allows more attempts than client-go's default. Applies and owners-set writes share it.
func ConflictBackoff() wait.Backoff {
	return wait.Backoff{Steps: 12, Duration: 5 * time.Millisecond, Factor: 1.6, Jitter: 0.5, Cap: 500 * time.Millisecond}
}

// Join adds owner to the object's owners set and marks the object as managed by Vidra.
// An existing object that Vidra does not manage is joined only when adopt is true. It
// returns the object's resourceVersion once joined.
func (w Writer) Join(ctx context.Context, ref inventory.Ref, owner string, adopt bool) (string, error) {
	var resourceVersion string
	err := retry.RetryOnConflict(ConflictBackoff(), func() error {
		obj, err := w.Read(ctx, ref)
		if err != nil {
			return fmt.Errorf("join %s: %w", ref, err)
		}
		if obj, err = w.Claim(ctx, obj, owner, adopt); err != nil {
			return err
		}
		resourceVersion = obj.ResourceVersion
		return nil
	})
	return resourceVersion, err
}

// Read returns the object's metadata (labels, annotations, managed fields, UID and
// resourceVersion) as the API server has it now, or ErrGone.
func (w Writer) Read(ctx context.Context, ref inventory.Ref) (*metav1.PartialObjectMetadata, error) {
	obj := metaOf(ref)
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ErrGone
		}
		return nil, err
	}
	return obj, nil
}

// Claim is one attempt at Join on the object as it was read (obj, which it does not
// read again): owner is added to the owners set with the resourceVersion of obj as a
// precondition, so a Conflict (returned as it is) means the object changed since and is
// to be read again. It returns the object as written, or obj when owner is already in.
func (w Writer) Claim(ctx context.Context, obj *metav1.PartialObjectMetadata, owner string, adopt bool) (*metav1.PartialObjectMetadata, error) {
	return w.ClaimFor(ctx, obj, owner, nil, adopt)
}

// ClaimFor is Claim for owner and, in the same write, others: owners of one process that
// wait to join the same object join it together.
func (w Writer) ClaimFor(ctx context.Context, obj *metav1.PartialObjectMetadata, owner string, others []string, adopt bool) (*metav1.PartialObjectMetadata, error) {
	ref := inventory.Ref{GVK: obj.GroupVersionKind(), Namespace: obj.Namespace, Name: obj.Name}
	if !obj.DeletionTimestamp.IsZero() {
		return nil, fmt.Errorf("join %s: being deleted: %w", ref, ErrGone)
	}
	owners, err := Owners(obj)
	if err != nil {
		return nil, err
	}
	if !IsManaged(obj) && len(owners) == 0 && !adopt {
		return nil, fmt.Errorf("join %s: %w", ref, ErrNotManaged)
	}
	if IsManaged(obj) && slices.Contains(owners, owner) {
		return obj, nil
	}
	joined := obj.DeepCopy()
	// The set is normalised (sorted, without duplicates) as it is written.
	if err := w.patch(ctx, joined, slices.Concat(owners, []string{owner}, others), true); err != nil {
		return nil, err
	}
	return joined, nil // the patch response updated it
}

// Leave removes owner from the object's owners set. When the set becomes empty the
// object is deleted (prune) with a resourceVersion precondition, or released: its owners
// annotation and managed-by label are removed and it stays. A delete that loses a race
// with a joining owner is retried from a fresh read, so that owner keeps the object.
func (w Writer) Leave(ctx context.Context, ref inventory.Ref, owner string, prune bool) (Outcome, error) {
	outcome := StillOwned
	err := retry.RetryOnConflict(ConflictBackoff(), func() error {
		obj := metaOf(ref)
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				outcome = Deleted
				return nil
			}
			return fmt.Errorf("leave %s: %w", ref, err)
		}
		owners, err := Owners(obj)
		if err != nil {
			return err
		}
		// Only an owner lets go. A Vidra-managed object with an empty set counts as the
		// leaver's: it created the object and stopped before recording itself.
		if !slices.Contains(owners, owner) && (len(owners) > 0 || !IsManaged(obj)) {
			outcome = NotOwned
			return nil
		}
		remaining := slices.DeleteFunc(slices.Clone(owners), func(s string) bool { return s == owner })
		switch {
		case len(remaining) > 0:
			outcome = StillOwned
			err := w.patch(ctx, obj, remaining, true)
			if errors.Is(err, ErrGone) {
				outcome = Deleted // deleted behind our back: there is nothing left to leave
				return nil
			}
			return err
		case prune && obj.Annotations[vidrav1alpha1.PruneAnnotation] != vidrav1alpha1.PruneDisabled:
			outcome = Deleted
			rv := obj.ResourceVersion
			err := w.Client.Delete(ctx, obj, client.Preconditions{ResourceVersion: &rv, UID: &obj.UID})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("delete %s: %w", ref, err)
			}
			return nil
		default:
			outcome = Released
			return w.patch(ctx, obj, nil, false)
		}
	})
	return outcome, err
}

// patch writes the owners set (and the managed-by label, or removes both) with the
// object's resourceVersion in the patch, so that the write fails with a conflict if the
// object changed since it was read; its UID rides along, so an object read elsewhere
// (another cluster of the same name) is refused even at an equal resourceVersion.
func (w Writer) patch(ctx context.Context, obj *metav1.PartialObjectMetadata, owners []string, managed bool) error {
	var annotation, label any // nil removes the key in a merge patch
	if managed {
		annotation, label = encode(owners), vidrav1alpha1.ManagedByValue
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.ResourceVersion,
		"uid":             obj.UID,
		"annotations":     map[string]any{vidrav1alpha1.OwnersAnnotation: annotation},
		"labels":          map[string]any{vidrav1alpha1.ManagedByLabel: label},
	}})
	if err != nil {
		return fmt.Errorf("encode owners patch: %w", err)
	}
	if err := w.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("write owners of %s: %w", obj.GetName(), ErrGone)
		}
		return err // a Conflict is retried by the caller's RetryOnConflict
	}
	return nil
}
