package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// uninstallUIDs names every ConfigMap in namespace on the first members, with its UID.
func uninstallUIDs(ctx context.Context, t *testing.T, namespace string, members int) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for i, m := range fleetenv.Fleet(ctx).Members[:members] {
		var list corev1.ConfigMapList
		if err := m.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			uids[fmt.Sprintf("member-%d/ConfigMap/%s", i, cm.Name)] = cm.UID
		}
	}
	return uids
}

// checkNotVidras checks that no ConfigMap in namespace on the first members carries
// Vidra's marks any more.
func checkNotVidras(ctx context.Context, t *testing.T, namespace string, members int) {
	t.Helper()
	for i, m := range fleetenv.Fleet(ctx).Members[:members] {
		var list corev1.ConfigMapList
		if err := m.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			if owners, ok := cm.Annotations[vidrav1alpha1.OwnersAnnotation]; ok || cm.Labels[vidrav1alpha1.ManagedByLabel] == vidrav1alpha1.ManagedByValue {
				t.Errorf("member-%d: ConfigMap %s/%s is still Vidra's: owners %q, labels %v", i, namespace, cm.Name, owners, cm.Labels)
			}
		}
	}
}

// checkHubEmpty checks that the hub holds no sync, VidraResource, VidraBundle,
// VidraCluster or enrollment Secret, and no pull cluster's namespace.
func checkHubEmpty(ctx context.Context, t *testing.T) {
	t.Helper()
	hub := fleetenv.Fleet(ctx).Hub.Client
	lists := []client.ObjectList{&vidrav1alpha1.VidraResourceList{}, &vidrav1alpha1.VidraBundleList{}, &vidrav1alpha1.VidraClusterList{}}
	for _, kind := range vidrav1alpha1.SyncKinds() {
		lists = append(lists, kind.NewList())
	}
	for _, list := range lists {
		testfleet.Poll(t, 100*time.Millisecond, 30*time.Second, fmt.Sprintf("no %T on the hub", list), func() (bool, error) {
			if err := hub.List(ctx, list); err != nil {
				return false, err
			}
			return len(namesOf(t, list)) == 0, nil
		})
	}
	var secrets corev1.SecretList
	if err := hub.List(ctx, &secrets, client.InNamespace(operatorNamespace), client.HasLabels{vidrav1alpha1.ClusterLabel}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) > 0 {
		t.Errorf("enrollment Secrets left on the hub: %v", namesOf(t, &secrets))
	}
	ns := &corev1.Namespace{}
	if err := hub.Get(ctx, client.ObjectKey{Name: pull.Namespace(uninstallPull)}, ns); err == nil && ns.DeletionTimestamp.IsZero() {
		t.Errorf("namespace %s is still on the hub", ns.Name)
	}
}

func namesOf(t *testing.T, list client.ObjectList) []string {
	t.Helper()
	var names []string
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range items {
		if m, err := meta.Accessor(o); err == nil {
			names = append(names, m.GetName())
		}
	}
	return names
}

// checkMembersEmpty checks that the push member keeps no identity, and the pull member
// no agent, no identity and no Vidra CRD.
func checkMembersEmpty(ctx context.Context, t *testing.T) {
	t.Helper()
	fleet := fleetenv.Fleet(ctx)
	gone := func(c client.Client, where string, obj client.Object) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) && obj.GetDeletionTimestamp().IsZero() {
			t.Errorf("%s: %T %s/%s is still there (%v)", where, obj, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	for _, m := range fleet.Members[:2] {
		gone(m.Client, m.Name, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallSystem, Name: "vidra"}})
	}
	member := fleet.Members[1]
	gone(member.Client, member.Name, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallSystem, Name: agentName}})
	gone(member.Client, member.Name, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: uninstallSystem, Name: vidrav1alpha1.AgentSecretName}})
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := member.Client.List(ctx, &crds, client.HasLabels{pull.InstalledByEnrollLabel}); err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		if crd.DeletionTimestamp.IsZero() && strings.HasSuffix(crd.Name, vidrav1alpha1.GroupVersion.Group) {
			t.Errorf("%s: CRD %s is still there", member.Name, crd.Name)
		}
	}
}

// reinstallHubCRDs puts Vidra's CRDs back on the hub for the suites that follow, once
// the deleted ones are gone.
func reinstallHubCRDs(ctx context.Context, t *testing.T, fleet *testfleet.Fleet) {
	dir, err := testfleet.CRDDirectory()
	if err != nil {
		t.Error(err)
		return
	}
	testfleet.Poll(t, 200*time.Millisecond, 60*time.Second, "the deleted CRDs gone from the hub", func() (bool, error) {
		var crds apiextensionsv1.CustomResourceDefinitionList
		if err := fleet.Hub.Client.List(ctx, &crds); err != nil {
			return false, err
		}
		for _, crd := range crds.Items {
			if crd.Spec.Group == vidrav1alpha1.GroupVersion.Group && !crd.DeletionTimestamp.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
	if out, err := fleet.Hub.Kubectl(ctx, nil, "apply", "--server-side", "-f", dir); err != nil {
		t.Errorf("reinstalling the CRDs: %v\n%s", err, out)
	}
	if out, err := fleet.Hub.Kubectl(ctx, nil, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		t.Errorf("waiting for the CRDs: %v\n%s", err, out)
	}
}
