package vidraresource_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// TestDestinationNamespaceThatAlreadyExistsIsUsedAsItIs: a namespace someone made before
// is where the bundle goes; Vidra neither marks it, nor lists it among what it owns, nor
// deletes it when the bundle goes.
func TestDestinationNamespaceThatAlreadyExistsIsUsedAsItIs(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]
	if err := member.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "made-by-hand"}}); err != nil {
		t.Fatal(err)
	}
	deliver(t, "into-existing", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "made-by-hand"},
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: into-existing}\ndata: {k: v}\n")
	vr := ready(t, "into-existing")
	if inInventory(vr, "Namespace", "", "made-by-hand") || len(vr.Status.ManagedResources) != 1 {
		t.Errorf("inventory = %+v, want the ConfigMap only", vr.Status.ManagedResources)
	}
	ns := &corev1.Namespace{}
	if !exists(t, member, ns, "", "made-by-hand") || ns.Labels[vidrav1alpha1.ManagedByLabel] != "" || ns.Annotations[vidrav1alpha1.OwnersAnnotation] != "" {
		t.Errorf("the existing namespace was marked: %v %v", ns.Labels, ns.Annotations)
	}
	if !exists(t, member, &corev1.ConfigMap{}, "made-by-hand", "into-existing") {
		t.Error("the ConfigMap was not delivered into the existing namespace")
	}
	if c := conditionOf(vr, vidrav1alpha1.ConditionConflict); c != nil {
		t.Errorf("a Conflict condition for a namespace used as it is: %s", c.Message)
	}

	remove(t, "into-existing")
	if !exists(t, member, ns, "", "made-by-hand") || !ns.DeletionTimestamp.IsZero() {
		t.Error("the existing namespace was deleted with the bundle")
	}
}
