package vidraresource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// configMapsWithLongNames is a bundle of n ConfigMaps whose names (246 characters) make
// each inventory entry about 340 bytes.
func configMapsWithLongNames(prefix string, n int) []byte {
	var b strings.Builder
	stem := prefix + strings.Repeat("n", 240-len(prefix))
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%05d\ndata:\n  k: v\n", stem, i)
	}
	return []byte(b.String())
}

// A bundle names as many objects as its VidraResource can record (its inventory is
// written to the hub before anything is applied, where an object may hold 1.5 MiB):
// 3,400 objects of long names are delivered, inventory and revision included. One of
// 4,500 would fit in its revision, and be applied, but its status never would: every
// status write failed ("etcdserver: request is too large", in the operator's log only).
// It stalls at once instead, saying why, with nothing applied.
func TestABundleIsDeliveredIfItsInventoryFitsAndStalledIfNot(t *testing.T) {
	ctx := context.Background()
	member := fleet.Members[0]

	fits, err := store.Put(ctx, configMapsWithLongNames("fits", 3400))
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, "inventory-fits", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "inventory-fits"}, "", withContent(fits))
	vr := readyWithin(t, "inventory-fits", budgetFor(3401))
	if vr.Status.ResourceCount != 3401 || vr.Status.Revision == 0 {
		t.Fatalf("delivered with %d objects in its inventory and revision %d, want 3,400 and the namespace, and a revision", vr.Status.ResourceCount, vr.Status.Revision)
	}

	tooMany, err := store.Put(ctx, configMapsWithLongNames("toomany", 4500))
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, "inventory-too-large", vidrav1alpha1.Destination{Cluster: member.Name, Namespace: "inventory-too-large"}, "", withContent(tooMany))
	stalled := condition(t, "inventory-too-large", vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonInventoryTooLarge)
	if msg := conditionMessage(stalled, vidrav1alpha1.ConditionStalled); !strings.Contains(msg, "4501 objects") || !strings.Contains(msg, "split the bundle") {
		t.Errorf("Stalled says %q, want the number of objects and what to do", msg)
	}
	testfleet.Eventually(t, 10*time.Second, "a Warning Event saying so", func() (bool, error) {
		return hasEvent(ctx, "inventory-too-large", vidrav1alpha1.ReasonInventoryTooLarge, "split the bundle")
	})
	var applied corev1.ConfigMapList
	if err := member.Client.List(ctx, &applied, client.InNamespace("inventory-too-large")); err != nil {
		t.Fatal(err)
	}
	if len(applied.Items) != 0 || exists(t, member, &corev1.Namespace{}, "", "inventory-too-large") {
		t.Errorf("%d ConfigMaps (or their namespace) were applied from a bundle that cannot be recorded", len(applied.Items))
	}
}
