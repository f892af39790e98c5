package vidraresource_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// deliver creates a VidraResource and deletes it (waiting for its release) when the test
// ends.
func deliver(t *testing.T, name string, dest vidrav1alpha1.Destination, manifest string, mutate ...func(*vidrav1alpha1.VidraResource)) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       vidrav1alpha1.VidraResourceSpec{Destination: dest, Manifest: manifest},
	}
	for _, m := range mutate {
		m(vr)
	}
	if err := fleet.Hub.Client.Create(context.Background(), vr); err != nil {
		t.Fatalf("create VidraResource %s: %v", name, err)
	}
	t.Cleanup(func() { remove(t, name) })
}

// remove deletes a VidraResource and waits until it is gone (its objects released), for as
// long as releasing what it manages may take.
func remove(t testing.TB, name string) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vr); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Delete(context.Background(), vr); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testfleet.Eventually(t, budgetFor(len(vr.Status.ManagedResources)), "VidraResource "+name+" deleted", func() (bool, error) {
		err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, &vidrav1alpha1.VidraResource{})
		return apierrors.IsNotFound(err), err
	})
}

// budgetFor is how long work on n objects may take while other packages load both cores:
// a fixed allowance and a share per object, so a large bundle's wait grows with its work
// rather than failing by load (3,401 objects once took over 30 s to release).
func budgetFor(n int) time.Duration {
	return 30*time.Second + time.Duration(n)*50*time.Millisecond
}

// condition waits until the VidraResource's condition has status and reason, and
// returns the VidraResource.
func condition(t *testing.T, name, conditionType string, status metav1.ConditionStatus, reason string) *vidrav1alpha1.VidraResource {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	testfleet.Eventually(t, 30*time.Second, name+" "+conditionType+"="+string(status)+" ("+reason+")", func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vr); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(vr.Status.Conditions, conditionType)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == vr.Generation, nil
	})
	return vr
}

func ready(t *testing.T, name string) *vidrav1alpha1.VidraResource {
	t.Helper()
	return condition(t, name, vidrav1alpha1.ConditionReady, metav1.ConditionTrue, vidrav1alpha1.ReasonSucceeded)
}

func conditionMessage(vr *vidrav1alpha1.VidraResource, conditionType string) string {
	if c := meta.FindStatusCondition(vr.Status.Conditions, conditionType); c != nil {
		return c.Message
	}
	return ""
}

// exists says whether an object is on the cluster.
func exists(t *testing.T, c *testfleet.Cluster, obj client.Object, namespace, name string) bool {
	t.Helper()
	err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// gone waits until an object is no longer on the cluster.
func gone(t *testing.T, c *testfleet.Cluster, obj client.Object, namespace, name string) {
	t.Helper()
	testfleet.Eventually(t, 60*time.Second, name+" gone", func() (bool, error) {
		return !exists(t, c, obj, namespace, name), nil
	})
}

func ownersOf(t *testing.T, obj client.Object) []string {
	t.Helper()
	o, err := ownership.Owners(obj)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func owned(t *testing.T, obj client.Object, owners ...string) bool {
	t.Helper()
	return ownership.IsManaged(obj) && slices.Equal(ownersOf(t, obj), owners)
}

// updateSpec changes the VidraResource as a person would: read, change, write, and again
// when the controller's status write came in between.
func updateSpec(t *testing.T, name string, mutate func(*vidrav1alpha1.VidraResource)) {
	t.Helper()
	testfleet.Edit(t, fleet.Hub.Client, &vidrav1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: name}}, mutate)
}

// metricValue reads a metric of the operator under test; -1 when absent.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return testfleet.MetricValue(t, registry, name, labels)
}

// hasEvent says whether the hub holds an Event about the VidraResource with the reason
// (any, when empty) whose note contains text.
func hasEvent(ctx context.Context, vr, reason, text string) (bool, error) {
	var list eventsv1.EventList
	if err := fleet.Hub.Client.List(ctx, &list); err != nil {
		return false, err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == vr && (reason == "" || e.Reason == reason) && strings.Contains(e.Note, text) {
			return true, nil
		}
	}
	return false, nil
}

// configMaps is a bundle of n ConfigMaps named prefix-0, prefix-1 and so on.
func configMaps(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d\ndata:\n  k: v\n", prefix, i)
	}
	return b.String()
}
