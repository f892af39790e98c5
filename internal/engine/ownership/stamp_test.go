package ownership_test

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

// applied is a ConfigMap as an owner's apply declares it.
func applied(name, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"data":     map[string]any{"k": value},
	}}
	u.SetLabels(map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue})
	return u
}

func applyAs(ctx context.Context, owner string, u *unstructured.Unstructured) error {
	return cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("vidra:"+owner))
}

// TestCreatingApplyOwnsTheObjectFromItsFirstMoment: an apply stamped new creates the
// object with its owner in the set, and never touches an object that exists, managed by
// Vidra or not.
func TestCreatingApplyOwnsTheObjectFromItsFirstMoment(t *testing.T) {
	ctx := context.Background()
	u := applied("stamped", "v")
	ownership.StampNew(u, "hub/creator")
	if err := applyAs(ctx, "hub/creator", u); err != nil {
		t.Fatal(err)
	}
	if got := ownersOf(t, "stamped"); !slices.Equal(got, []string{"hub/creator"}) {
		t.Fatalf("owners = %v, want [hub/creator]", got)
	}

	again := applied("stamped", "other")
	ownership.StampNew(again, "hub/late")
	if err := applyAs(ctx, "hub/late", again); !apierrors.IsConflict(err) {
		t.Fatalf("creating apply of an existing object = %v, want a Conflict", err)
	}
	createConfigMap(t, "someone-elses-too", false)
	theirs := applied("someone-elses-too", "ours")
	ownership.StampNew(theirs, "hub/late")
	if err := applyAs(ctx, "hub/late", theirs); !apierrors.IsConflict(err) {
		t.Fatalf("creating apply of an unmanaged object = %v, want a Conflict", err)
	}
	if cm, _ := get(t, "stamped"); cm.Data["k"] != "v" || !slices.Equal(ownersOf(t, "stamped"), []string{"hub/creator"}) {
		t.Errorf("existing object changed: %v %v", cm.Data, cm.Annotations)
	}
	if cm, _ := get(t, "someone-elses-too"); ownership.IsManaged(cm) || cm.Data["k"] != "v" {
		t.Errorf("unmanaged object changed: %v %v", cm.Labels, cm.Data)
	}
}

// TestCreatorKeepsTheSetUntilAnotherOwnerJoins: the creator's apply owns the owners
// annotation, so its later applies declare the set as read (an apply that left it out
// would delete it); once another owner has joined, the set is Writer's and the creator's
// applies leave it out, without deleting it.
func TestCreatorKeepsTheSetUntilAnotherOwnerJoins(t *testing.T) {
	ctx := context.Background()
	w := ownership.Writer{Client: cluster.Client}
	ref := configMapRef("kept-set")
	u := applied("kept-set", "v")
	ownership.StampNew(u, "hub/creator")
	if err := applyAs(ctx, "hub/creator", u); err != nil {
		t.Fatal(err)
	}
	reapply := func(value string) error {
		live, err := w.Read(ctx, ref)
		if err != nil {
			return err
		}
		u := applied("kept-set", value)
		ownership.Stamp(u, live, "vidra:hub/creator")
		return applyAs(ctx, "hub/creator", u)
	}
	if err := reapply("v2"); err != nil {
		t.Fatal(err)
	}
	if got := ownersOf(t, "kept-set"); !slices.Equal(got, []string{"hub/creator"}) {
		t.Fatalf("owners = %v after the creator applied again", got)
	}

	if _, err := w.Join(ctx, ref, "hub/joiner", false); err != nil {
		t.Fatal(err)
	}
	if err := reapply("v3"); err != nil {
		t.Fatal(err)
	}
	cm, _ := get(t, "kept-set")
	if got := ownersOf(t, "kept-set"); !slices.Equal(got, []string{"hub/creator", "hub/joiner"}) || cm.Data["k"] != "v3" {
		t.Fatalf("owners = %v, data %v after the creator applied once hub/joiner had joined", got, cm.Data)
	}

	// The joiner leaves: what remains is the creator's, and stays through its applies.
	if outcome, err := w.Leave(ctx, ref, "hub/joiner", true); err != nil || outcome != ownership.StillOwned {
		t.Fatalf("leave = %v, %v", outcome, err)
	}
	if err := reapply("v4"); err != nil {
		t.Fatal(err)
	}
	if got := ownersOf(t, "kept-set"); !slices.Equal(got, []string{"hub/creator"}) {
		t.Errorf("owners = %v", got)
	}
}

// TestStaleSetIsNeverApplied: an apply that declares the set as read before another
// owner joined fails, whatever the creator's field ownership; the joiner stays.
func TestStaleSetIsNeverApplied(t *testing.T) {
	ctx := context.Background()
	w := ownership.Writer{Client: cluster.Client}
	ref := configMapRef("stale-set")
	u := applied("stale-set", "v")
	ownership.StampNew(u, "hub/creator")
	if err := applyAs(ctx, "hub/creator", u); err != nil {
		t.Fatal(err)
	}
	stale, err := w.Read(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Join(ctx, ref, "hub/joiner", false); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		u := applied("stale-set", "v2")
		ownership.Stamp(u, stale, "vidra:hub/creator")
		opts := []client.ApplyOption{client.FieldOwner("vidra:hub/creator")}
		if force {
			opts = append(opts, client.ForceOwnership)
		}
		if err := cluster.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); !apierrors.IsConflict(err) {
			t.Fatalf("apply (force %v) of a stale set = %v, want a Conflict", force, err)
		}
	}
	if got := ownersOf(t, "stale-set"); !slices.Equal(got, []string{"hub/creator", "hub/joiner"}) {
		t.Errorf("owners = %v: a stale set was written", got)
	}
}

// TestClaimRefusesAnObjectReadElsewhere: a join decided on another object (another
// cluster's, of the same name) is refused even when the resourceVersions are equal.
func TestClaimRefusesAnObjectReadElsewhere(t *testing.T) {
	ctx := context.Background()
	w := ownership.Writer{Client: cluster.Client}
	createConfigMap(t, "elsewhere", true)
	obj, err := w.Read(ctx, configMapRef("elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	obj.UID = types.UID("00000000-0000-0000-0000-000000000000")
	if _, err := w.Claim(ctx, obj, "hub/web", false); err == nil {
		t.Fatal("a join decided on another object was written")
	}
	if got := ownersOf(t, "elsewhere"); len(got) != 0 {
		t.Errorf("owners = %v", got)
	}
}
