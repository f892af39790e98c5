package testoperator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// SetPolicy sets (nil: removes) the delivery policy annotations of a member's enrollment
// Secret, and waits until its VidraCluster shows the result.
func SetPolicy(t testing.TB, hub client.Client, member string, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: member}, secret); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{vidrav1alpha1.AllowedNamespacesAnnotation, vidrav1alpha1.AllowedClusterKindsAnnotation, vidrav1alpha1.RequireServiceAccountAnnotation} {
		delete(secret.Annotations, k)
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		secret.Annotations[k] = v
	}
	if err := hub.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	namespaces, kinds := annotations[vidrav1alpha1.AllowedNamespacesAnnotation], annotations[vidrav1alpha1.AllowedClusterKindsAnnotation]
	testfleet.Eventually(t, 30*time.Second, "VidraCluster "+member+" shows its policy", func() (bool, error) {
		vc := &vidrav1alpha1.VidraCluster{}
		if err := hub.Get(ctx, client.ObjectKey{Name: member}, vc); err != nil {
			return false, err
		}
		p := vc.Status.DeliveryPolicy
		if annotations == nil {
			return p == nil, nil
		}
		return p != nil && strings.Join(p.AllowedNamespaces, ",") == namespaces && slices.Equal(p.AllowedClusterKinds, splitList(kinds)) &&
			p.RequireServiceAccount == (annotations[vidrav1alpha1.RequireServiceAccountAnnotation] == "true"), nil
	})
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// LabelCluster sets the label key=value ("": removes it) on a member's enrollment Secret,
// and waits until its VidraCluster shows it: a clusterSelector selects by those labels.
func LabelCluster(t testing.TB, hub client.Client, member, key, value string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: member}, secret); err != nil {
		t.Fatal(err)
	}
	if value == "" {
		delete(secret.Labels, key)
	} else {
		secret.Labels[key] = value
	}
	if err := hub.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, 30*time.Second, "VidraCluster "+member+" relabeled", func() (bool, error) {
		vc := &vidrav1alpha1.VidraCluster{}
		err := hub.Get(ctx, client.ObjectKey{Name: member}, vc)
		return err == nil && vc.Labels[key] == value, err
	})
}

// RequestSync asks for a sync of obj now, as a webhook or kubectl annotate does: its
// requested-at annotation changes.
func RequestSync(t testing.TB, hub client.Client, obj client.Object) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, vidrav1alpha1.RequestedAtAnnotation, time.Now().Format(time.RFC3339Nano)))
	if err := hub.Patch(context.Background(), obj, patch); err != nil {
		t.Fatal(err)
	}
}
