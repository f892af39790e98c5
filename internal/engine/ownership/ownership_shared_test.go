package ownership_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/inventory"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

func configMapRef(name string) inventory.Ref {
	return inventory.Ref{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: "default", Name: name}
}

// createConfigMap creates a ConfigMap as an owner's apply would: with the managed-by label.
func createConfigMap(t *testing.T, name string, managed bool) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if managed {
		cm.Labels = map[string]string{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}
	}
	if err := cluster.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, name string) (*corev1.ConfigMap, bool) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm, true
}

func ownersOf(t *testing.T, name string) []string {
	t.Helper()
	cm, ok := get(t, name)
	if !ok {
		t.Fatalf("%s is gone", name)
	}
	owners, err := ownership.Owners(cm)
	if err != nil {
		t.Fatal(err)
	}
	return owners
}

func TestSharedObjectSurvivesUntilLastOwnerLeaves(t *testing.T) {
	ctx := context.Background()
	w := ownership.Writer{Client: cluster.Client}
	ref := configMapRef("shared")
	createConfigMap(t, "shared", true)

	for _, owner := range []string{"hub/web", "hub/api", "hub/web"} {
		if _, err := w.Join(ctx, ref, owner, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := ownersOf(t, "shared"); !slices.Equal(got, []string{"hub/api", "hub/web"}) {
		t.Fatalf("owners = %v, want the sorted set [hub/api hub/web]", got)
	}
	cm, _ := get(t, "shared")
	if raw := cm.Annotations[vidrav1alpha1.OwnersAnnotation]; raw != `["hub/api","hub/web"]` {
		t.Errorf("annotation = %s", raw)
	}

	if outcome, err := w.Leave(ctx, ref, "hub/web", true); err != nil || outcome != ownership.StillOwned {
		t.Fatalf("first leave = %v, %v; want StillOwned", outcome, err)
	}
	if got := ownersOf(t, "shared"); !slices.Equal(got, []string{"hub/api"}) {
		t.Fatalf("owners = %v after hub/web left", got)
	}
	if outcome, err := w.Leave(ctx, ref, "hub/api", true); err != nil || outcome != ownership.Deleted {
		t.Fatalf("last leave = %v, %v; want Deleted", outcome, err)
	}
	if _, ok := get(t, "shared"); ok {
		t.Error("the object outlived its last owner")
	}
	// Leaving again is harmless.
	if outcome, err := w.Leave(ctx, ref, "hub/api", true); err != nil || outcome != ownership.Deleted {
		t.Errorf("leave of a gone object = %v, %v", outcome, err)
	}
}

// TestDeleteLosesToAnOwnerJoiningAtTheSameMoment: the last owner computes an empty set,
// another owner joins before the delete lands; the resourceVersion precondition fails the
// delete, and the object stays with the joiner.
func TestDeleteLosesToAnOwnerJoiningAtTheSameMoment(t *testing.T) {
	ctx := context.Background()
	ref := configMapRef("contested")
	createConfigMap(t, "contested", true)
	plain := ownership.Writer{Client: cluster.Client}
	if _, err := plain.Join(ctx, ref, "hub/leaver", false); err != nil {
		t.Fatal(err)
	}
	base, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	joined := false
	racing := interceptor.NewClient(base, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if !joined {
				joined = true
				if _, err := plain.Join(ctx, ref, "hub/joiner", false); err != nil {
					t.Errorf("join during delete: %v", err)
				}
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	outcome, err := ownership.Writer{Client: racing}.Leave(ctx, ref, "hub/leaver", true)
	if err != nil || outcome != ownership.StillOwned {
		t.Fatalf("leave = %v, %v; want StillOwned", outcome, err)
	}
	if got := ownersOf(t, "contested"); !slices.Equal(got, []string{"hub/joiner"}) {
		t.Errorf("owners = %v, want [hub/joiner]", got)
	}
}

func TestUnmanagedObjectIsNotTakenOverUnlessAdopted(t *testing.T) {
	ctx := context.Background()
	w := ownership.Writer{Client: cluster.Client}
	ref := configMapRef("someone-elses")
	createConfigMap(t, "someone-elses", false)

	if _, err := w.Join(ctx, ref, "hub/web", false); !errors.Is(err, ownership.ErrNotManaged) {
		t.Fatalf("join = %v, want ErrNotManaged", err)
	}
	cm, _ := get(t, "someone-elses")
	if ownership.IsManaged(cm) || cm.Annotations[vidrav1alpha1.OwnersAnnotation] != "" {
		t.Fatalf("an unmanaged object was marked: %v %v", cm.Labels, cm.Annotations)
	}
	if _, err := w.Join(ctx, ref, "hub/web", true); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	cm, _ = get(t, "someone-elses")
	if !ownership.IsManaged(cm) || !slices.Equal(ownersOf(t, "someone-elses"), []string{"hub/web"}) {
		t.Errorf("adopted object = %v %v", cm.Labels, cm.Annotations)
	}
}

func TestPruneFalseReleasesWithoutDeleting(t *testing.T) {
	ctx := context.Background()
	w := ownership.Writer{Client: cluster.Client}
	ref := configMapRef("kept")
	createConfigMap(t, "kept", true)
	if _, err := w.Join(ctx, ref, "hub/web", false); err != nil {
		t.Fatal(err)
	}
	if outcome, err := w.Leave(ctx, ref, "hub/web", false); err != nil || outcome != ownership.Released {
		t.Fatalf("leave = %v, %v; want Released", outcome, err)
	}
	cm, ok := get(t, "kept")
	if !ok {
		t.Fatal("prune: false deleted the object")
	}
	if ownership.IsManaged(cm) || cm.Annotations[vidrav1alpha1.OwnersAnnotation] != "" || cm.Data["k"] != "v" {
		t.Errorf("released object = labels %v annotations %v data %v", cm.Labels, cm.Annotations, cm.Data)
	}
}

func TestJoinOfAGoneObjectSaysSo(t *testing.T) {
	_, err := ownership.Writer{Client: cluster.Client}.Join(context.Background(), configMapRef("never-created"), "hub/web", false)
	if !errors.Is(err, ownership.ErrGone) {
		t.Errorf("join = %v, want ErrGone", err)
	}
}

func TestUnparsableOwnersIsAnError(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{vidrav1alpha1.OwnersAnnotation: "hub/web"}}}
	if _, err := ownership.Owners(cm); err == nil {
		t.Error("a non-JSON owners annotation parsed")
	}
}

// TestLeavingAnObjectNotOwnedChangesNothing: an owner that is not in the set (the object
// was never joined, or is someone else's) neither deletes nor edits it.
func TestLeavingAnObjectNotOwnedChangesNothing(t *testing.T) {
	ctx := context.Background()
	w := ownership.Writer{Client: cluster.Client}
	createConfigMap(t, "unowned", false)
	if outcome, err := w.Leave(ctx, configMapRef("unowned"), "hub/web", true); err != nil || outcome != ownership.NotOwned {
		t.Fatalf("leave of an unmanaged object = %v, %v; want NotOwned", outcome, err)
	}
	if _, ok := get(t, "unowned"); !ok {
		t.Fatal("an object Vidra does not manage was deleted")
	}
	createConfigMap(t, "others", true)
	if _, err := w.Join(ctx, configMapRef("others"), "hub/other", false); err != nil {
		t.Fatal(err)
	}
	if outcome, err := w.Leave(ctx, configMapRef("others"), "hub/web", true); err != nil || outcome != ownership.NotOwned {
		t.Fatalf("leave of another owner's object = %v, %v; want NotOwned", outcome, err)
	}
	if !slices.Equal(ownersOf(t, "others"), []string{"hub/other"}) {
		t.Errorf("owners = %v", ownersOf(t, "others"))
	}
	// A managed object with an empty set was created by an owner that stopped before
	// recording itself: its owner's release deletes it.
	createConfigMap(t, "half-created", true)
	if outcome, err := w.Leave(ctx, configMapRef("half-created"), "hub/web", true); err != nil || outcome != ownership.Deleted {
		t.Fatalf("leave of a half-created object = %v, %v; want Deleted", outcome, err)
	}
}
