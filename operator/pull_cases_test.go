package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/content"
	"github.com/vidra-operator/vidra/internal/fleet/pull"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// testPullHelm: a chart is rendered for a pull member as it is, though the hub cannot
// ask it: its agent reports the member's version and APIs, and a template that checks
// for an API the member serves sees it.
func testPullHelm(t *testing.T, h *pullHub) {
	ctx := context.Background()
	member := h.pullMember
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.vidra.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.vidra.dev", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets", Singular: "widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := member.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.Client.Delete(context.Background(), crd) })
	dc, err := discovery.NewDiscoveryClientForConfig(member.Config)
	if err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, objectsTimeout, "example.vidra.dev/v1 served on the member", func() (bool, error) {
		_, err := dc.ServerResourcesForGroupVersion("example.vidra.dev/v1")
		return err == nil, nil
	})

	// The agent reports it to the hub, which cannot ask the member itself.
	reported := client.ObjectKey{Namespace: pull.Namespace(member.Name), Name: pull.CapabilitiesName}
	testfleet.Eventually(t, objectsTimeout, "the agent reported example.vidra.dev/v1", func() (bool, error) {
		cm := &corev1.ConfigMap{}
		err := h.admin.Get(ctx, reported, cm)
		return err == nil && strings.Contains(cm.Data[pull.APIVersionsKey], "example.vidra.dev/v1/Widget") && cm.Data[pull.KubeVersionKey] == "v1.36.0", err
	})

	repo := helmrepo.NewRepo(t)
	repo.Add(helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0"))
	hs := &vidrav1alpha1.HelmSync{
		ObjectMeta: metav1.ObjectMeta{Name: "pull-caps"},
		Spec: vidrav1alpha1.HelmSyncSpec{
			Source: vidrav1alpha1.HelmSource{RepoURL: repo.URL(), Chart: helmrepo.CapsChart, InsecureAllowHTTP: true},
		},
	}
	hs.Spec.Destination = vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: member.Name, Namespace: appNamespace}}
	hs.Spec.Interval = &metav1.Duration{Duration: time.Hour}
	if err := h.admin.Create(ctx, hs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.admin.Delete(context.Background(), hs) })
	t.Cleanup(func() {
		if t.Failed() {
			got := &vidrav1alpha1.HelmSync{}
			_ = h.admin.Get(context.Background(), client.ObjectKeyFromObject(hs), got)
			t.Logf("HelmSync %s: %+v bundles %+v", hs.Name, got.Status.Conditions, got.Status.Bundles)
		}
	})
	testfleet.Eventually(t, objectsTimeout, "the chart rendered for the pull member and delivered", func() (bool, error) {
		cm := &corev1.ConfigMap{}
		err := member.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "pull-caps-caps"}, cm)
		return err == nil && cm.Data["hasWidgets"] == "true" && cm.Data["kubeVersion"] == "v1.36.0", client.IgnoreNotFound(err)
	})
	testfleet.Eventually(t, objectsTimeout, "the HelmSync Ready", func() (bool, error) {
		err := h.admin.Get(ctx, client.ObjectKeyFromObject(hs), hs)
		return err == nil && meta.IsStatusConditionTrue(hs.Status.Conditions, vidrav1alpha1.ConditionReady), err
	})
}

// testBundleGoneUnannounced: a bundle that disappears from the hub without being
// withdrawn (a hub restored from a backup, finalizers removed by hand) does not prune
// its member: the copy stays, and says why on an Event.
func testBundleGoneUnannounced(t *testing.T, h *pullHub) {
	ctx := context.Background()
	b := &vidrav1alpha1.VidraBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: pull.Namespace(h.pullMember.Name), Name: "pull-unannounced",
			Annotations: map[string]string{vidrav1alpha1.HubGenerationAnnotation: "1"}},
		Spec: vidrav1alpha1.VidraResourceSpec{Manifest: appConfigMap("unannounced", "stays"),
			Destination: vidrav1alpha1.Destination{Namespace: appNamespace}},
	}
	// Written as the operator: only it writes a pull cluster's bundles.
	if err := h.operator.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	copyKey := client.ObjectKey{Name: b.Name}
	testfleet.Eventually(t, objectsTimeout, "the bundle delivered", func() (bool, error) {
		err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "unannounced"}, &corev1.ConfigMap{})
		return err == nil, client.IgnoreNotFound(err)
	})
	if err := h.operator.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, objectsTimeout, "an Event on the copy saying the hub no longer publishes it", func() (bool, error) {
		var events eventsv1.EventList
		if err := h.pullMember.Client.List(ctx, &events); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == b.Name && e.Reason == "NotPublished" {
				return true, nil
			}
		}
		return false, nil
	})
	copied := &vidrav1alpha1.VidraResource{}
	if err := h.pullMember.Client.Get(ctx, copyKey, copied); err != nil || !copied.DeletionTimestamp.IsZero() {
		t.Fatalf("the copy of a bundle gone unannounced was not kept: %v %v", err, copied.DeletionTimestamp)
	}
	if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "unannounced"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("what the copy delivered was not kept: %v", err)
	}
	// A person who agrees deletes the copy on the member: it releases what it delivered.
	if err := h.pullMember.Client.Delete(ctx, copied); err != nil {
		t.Fatal(err)
	}
	testfleet.Eventually(t, objectsTimeout, "the copy released by the member's own controller", func() (bool, error) {
		err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "unannounced"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// TestPullMemberMovedToPushKeepsItsObjects: a pull member enrolled again in push mode,
// its agent still running, is handed over: the hub delivers there itself, in the same
// owners' names, and the agent drops its copies without releasing anything, so nothing
// delivered is deleted on the way.
func TestPullMemberMovedToPushKeepsItsObjects(t *testing.T) {
	h := startPullHub(t)
	ctx := context.Background()
	name := h.pullMember.Name
	h.vidraResource(t, "handed-over", name, appConfigMap("handed-over", "kept"), nil)
	h.resource(t, "handed-over", "Ready through the agent", ready)
	before := &corev1.ConfigMap{}
	if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "handed-over"}, before); err != nil {
		t.Fatal(err)
	}

	// Enrolled again in push mode, as kubectl vidra enroll --overwrite writes it.
	secret := &corev1.Secret{}
	if err := h.admin.Get(ctx, client.ObjectKey{Namespace: testoperator.Namespace, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	delete(secret.Annotations, vidrav1alpha1.ModeAnnotation)
	secret.Data = map[string][]byte{vidrav1alpha1.KubeconfigKey: h.pullMember.Kubeconfig}
	if err := h.admin.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	h.cluster(t, name, "engaged in push mode", func(vc *vidrav1alpha1.VidraCluster) bool {
		return vc.Status.Mode == vidrav1alpha1.ClusterModePush && vc.Status.Phase == vidrav1alpha1.ClusterEngaged
	})
	testfleet.Eventually(t, objectsTimeout, "the bundle withdrawn and the agent's copy dropped", func() (bool, error) {
		errBundle := h.admin.Get(ctx, client.ObjectKey{Namespace: pull.Namespace(name), Name: "handed-over"}, &vidrav1alpha1.VidraBundle{})
		errCopy := h.pullMember.Client.Get(ctx, client.ObjectKey{Name: "handed-over"}, &vidrav1alpha1.VidraResource{})
		return apierrors.IsNotFound(errBundle) && apierrors.IsNotFound(errCopy), nil
	})
	vr := h.resource(t, "handed-over", "Ready by push", ready)
	if vr.Status.Cluster != name {
		t.Fatalf("the VidraResource delivers to %q", vr.Status.Cluster)
	}
	after := &corev1.ConfigMap{}
	if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "handed-over"}, after); err != nil {
		t.Fatalf("the handed-over object is gone: %v", err)
	}
	if after.UID != before.UID {
		t.Fatalf("the handed-over object was deleted and made again (uid %s, was %s)", after.UID, before.UID)
	}
}

// testPullSealed: content a sync decrypted, stored sealed (under an address that is no
// hash of its bytes), is copied to the pull cluster's namespace under the same address,
// and its agent reads and applies it.
func testPullSealed(t *testing.T, h *pullHub) {
	ctx := context.Background()
	hubStore := &content.Store{Client: h.admin, Reader: h.admin, Namespace: testoperator.Namespace}
	address := content.Digest([]byte("the encrypted input of testPullSealed"))
	if _, err := hubStore.PutSealed(ctx, address, []byte(appConfigMap("sealed", "decrypted"))); err != nil {
		t.Fatal(err)
	}
	h.vidraResource(t, "pull-sealed", h.pullMember.Name, "", &vidrav1alpha1.ContentReference{Digest: address})
	h.resource(t, "pull-sealed", "Ready through the agent", ready)
	cm := &corev1.ConfigMap{}
	if err := h.pullMember.Client.Get(ctx, client.ObjectKey{Namespace: appNamespace, Name: "sealed"}, cm); err != nil || cm.Data["value"] != "decrypted" {
		t.Fatalf("the pull member's ConfigMap: %v, %v", cm.Data, err)
	}
	mirrored := &content.Store{Client: h.admin, Reader: h.admin, Namespace: pull.Namespace(h.pullMember.Name)}
	if info, err := mirrored.Stat(ctx, address); err != nil || info.MD5 != content.MD5([]byte(address)) {
		t.Errorf("the copy in the cluster's namespace: %+v, %v; want it sealed under the same address", info, err)
	}
}
