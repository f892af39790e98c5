package operator_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// chartRolesAreNoWiderThanKubernetes is tried as people bound cluster-wide to Kubernetes'
// own roles, aggregated by the controller manager as on any cluster. Before, edit
// delivered to the hub and every member, and view read every bundle's manifests, Secrets
// included, in VidraResources and in the content store's ConfigMaps; now edit writes
// VidraResources that deliver nowhere, view reads syncs and clusters but no bundle, stored
// or inline, and deliver comes only from a role bound for it.
func (h *sharedHub) chartRolesAreNoWiderThanKubernetes(t *testing.T) {
	ctx := context.Background()
	viewer := h.boundTo(t, "viewer", "view")
	editor := h.boundTo(t, "editor", "edit")
	deliverer := h.boundTo(t, "deliverer", "edit", chartRelease+"-deliver-everywhere")
	testfleet.Eventually(t, objectsTimeout, "the chart's roles aggregated into view and edit", func() (bool, error) {
		return viewer.List(ctx, &vidrav1alpha1.GitSyncList{}) == nil && editor.List(ctx, &vidrav1alpha1.VidraResourceList{}) == nil, nil
	})

	m0 := h.fleet.Members[0].Name
	if err := viewer.List(ctx, &vidrav1alpha1.VidraClusterList{}); err != nil {
		t.Errorf("view does not list VidraClusters: %v", err)
	}
	if err := viewer.List(ctx, &vidrav1alpha1.VidraResourceList{}); !apierrors.IsForbidden(err) {
		t.Errorf("view lists VidraResources, whose manifests may hold Secrets: %v", err)
	}
	h.viewReadsNoStoredContent(t, viewer)
	for _, dest := range []string{m0, vidrav1alpha1.LocalClusterName} {
		vr := bundle("edit-delivers-"+dest, vidrav1alpha1.Destination{Cluster: dest, Namespace: "team-e"}, configMap("e", "v"))
		refused(t, editor.Create(ctx, vr, client.DryRunAll), "editor may not deliver to cluster "+dest)
		if err := deliverer.Create(ctx, vr, client.DryRunAll); err != nil {
			t.Errorf("edit with %s-deliver-everywhere may not deliver to %s: %v", chartRelease, dest, err)
		}
	}
	everywhere := &vidrav1alpha1.GitSync{
		ObjectMeta: metav1.ObjectMeta{Name: "edit-fans-out"},
		Spec: vidrav1alpha1.GitSyncSpec{
			Source:      vidrav1alpha1.GitSource{URL: "https://git.example/fleet"},
			SyncOptions: vidrav1alpha1.SyncOptions{Destination: vidrav1alpha1.SyncDestination{ClusterSelector: &metav1.LabelSelector{}}},
		},
	}
	refused(t, editor.Create(ctx, everywhere, client.DryRunAll), "editor may not deliver to every cluster")
}

// boundTo provisions a user bound cluster-wide to the ClusterRoles named.
func (h *sharedHub) boundTo(t *testing.T, name string, roles ...string) client.Client {
	t.Helper()
	ctx := context.Background()
	for _, role := range roles {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
		}
		if err := h.admin.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
		cleanup(t, h.admin, binding)
	}
	return h.signIn(t, name)
}

// viewReadsNoStoredContent: a bundle stored on the hub (a Secret in it) is not read by
// one bound to view: none of its chunks is among the ConfigMaps view reads, and its
// chunks are not to be read either.
func (h *sharedHub) viewReadsNoStoredContent(t *testing.T, viewer client.Client) {
	ctx := context.Background()
	store := &content.Store{Client: h.admin, Reader: h.admin, Namespace: testoperator.Namespace}
	digest, err := store.Put(ctx, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: stored\nstringData:\n  token: stored-token\n"))
	if err != nil {
		t.Fatal(err)
	}
	var readable corev1.ConfigMapList
	if err := viewer.List(ctx, &readable, client.InNamespace(testoperator.Namespace)); err != nil {
		t.Fatalf("view lists the ConfigMaps of the operator's namespace: %v", err)
	}
	for _, cm := range readable.Items {
		if cm.Annotations[content.DigestAnnotation] != "" {
			t.Errorf("view reads ConfigMap %s, a chunk of stored content %s", cm.Name, cm.Annotations[content.DigestAnnotation])
		}
	}
	chunk := client.ObjectKey{Namespace: testoperator.Namespace, Name: content.ChunkName(digest, 0)}
	if err := viewer.Get(ctx, chunk, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("view reads the chunk of stored content %s: %v (want Forbidden)", digest, err)
	}
}
