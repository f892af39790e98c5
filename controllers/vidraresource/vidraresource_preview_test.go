package vidraresource_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

func previewBundle(value, password string, extra ...string) string {
	docs := []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {value: " + value + "}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: credentials}\nstringData: {password: " + password + "}\n",
	}
	return strings.Join(append(docs, extra...), "---\n")
}

// changeOf finds the preview's change of one object.
func changeOf(p *vidrav1alpha1.PreviewStatus, kind, name string) *vidrav1alpha1.PreviewChange {
	for i := range p.Changes {
		if p.Changes[i].Kind == kind && p.Changes[i].Name == name {
			return &p.Changes[i]
		}
	}
	return nil
}

// waitPreview waits for a preview of the VidraResource's current generation.
func waitPreview(t *testing.T, name string) (*vidrav1alpha1.VidraResource, *vidrav1alpha1.PreviewStatus) {
	t.Helper()
	vr := &vidrav1alpha1.VidraResource{}
	testfleet.Eventually(t, 30*time.Second, "a preview of "+name, func() (bool, error) {
		if err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, vr); err != nil {
			return false, err
		}
		p := vr.Status.Preview
		return p != nil && p.ObservedGeneration == vr.Generation && p.ComputedAt != nil, nil
	})
	return vr, vr.Status.Preview
}

// spec.dryRun previews a change by server-side dry-run on the member: what would be
// created, updated (as a diff, Secret values redacted), pruned and left; nothing changes.
func TestDryRunPreviewsCreateUpdatePruneAndAppliesNothing(t *testing.T) {
	m := fleet.Members[0]
	const ns = "preview-ns"
	const oldPassword, newPassword = "hunter2-old", "hunter2-new"
	extra := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leaving}\ndata: {value: leaves}\n"
	deliver(t, "preview", vidrav1alpha1.Destination{Cluster: m.Name, Namespace: ns}, previewBundle("v1", oldPassword, extra))
	ready(t, "preview")

	updateSpec(t, "preview", func(vr *vidrav1alpha1.VidraResource) {
		vr.Spec.DryRun = true
		vr.Spec.Manifest = previewBundle("v2", newPassword, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: arriving}\ndata: {value: arrived}\n")
	})
	vr, p := waitPreview(t, "preview")
	if c := condition(t, "preview", vidrav1alpha1.ConditionReady, metav1.ConditionTrue, "DryRun"); !strings.Contains(conditionMessage(c, vidrav1alpha1.ConditionReady), "nothing applied") {
		t.Errorf("Ready says %q", conditionMessage(c, vidrav1alpha1.ConditionReady))
	}
	if p.Create != 1 || p.Update != 2 || p.Prune != 1 || p.Failed != 0 {
		t.Fatalf("preview counts create %d update %d prune %d failed %d; want 1, 2, 1, 0: %+v", p.Create, p.Update, p.Prune, p.Failed, p.Changes)
	}
	if c := changeOf(p, "ConfigMap", "arriving"); c == nil || c.Action != vidrav1alpha1.PreviewCreate || c.Namespace != ns {
		t.Errorf("arriving: %+v", c)
	}
	if c := changeOf(p, "ConfigMap", "leaving"); c == nil || c.Action != vidrav1alpha1.PreviewPrune {
		t.Errorf("leaving: %+v", c)
	}
	settings := changeOf(p, "ConfigMap", "settings")
	if settings == nil || settings.Action != vidrav1alpha1.PreviewUpdate || !strings.Contains(settings.Diff, "-  value: v1") || !strings.Contains(settings.Diff, "+  value: v2") {
		t.Errorf("settings: %+v", settings)
	}
	secret := changeOf(p, "Secret", "credentials")
	if secret == nil || secret.Action != vidrav1alpha1.PreviewUpdate || !strings.Contains(secret.Diff, "redacted: new value") {
		t.Errorf("credentials: %+v", secret)
	}
	for _, leak := range []string{oldPassword, newPassword, base64.StdEncoding.EncodeToString([]byte(oldPassword)), base64.StdEncoding.EncodeToString([]byte(newPassword))} {
		if secret != nil && strings.Contains(secret.Diff, leak) {
			t.Errorf("the preview shows a Secret value: %s", secret.Diff)
		}
	}

	// Nothing was applied or pruned.
	cm := &corev1.ConfigMap{}
	if !exists(t, m, cm, ns, "settings") || cm.Data["value"] != "v1" {
		t.Errorf("settings changed: %v", cm.Data)
	}
	if !exists(t, m, &corev1.ConfigMap{}, ns, "leaving") || exists(t, m, &corev1.ConfigMap{}, ns, "arriving") {
		t.Error("a dry run created or pruned an object")
	}
	if len(vr.Status.ManagedResources) != 4 { // the namespace and three objects, as before
		t.Errorf("the inventory changed: %+v", vr.Status.ManagedResources)
	}

	// Without dryRun the same change lands, and the preview goes.
	updateSpec(t, "preview", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.DryRun = false })
	vr = ready(t, "preview")
	if vr.Status.Preview != nil {
		t.Errorf("a preview stayed after the change landed: %+v", vr.Status.Preview)
	}
	if !exists(t, m, cm, ns, "settings") || cm.Data["value"] != "v2" || !exists(t, m, &corev1.ConfigMap{}, ns, "arriving") {
		t.Errorf("the change did not land: %v", cm.Data)
	}
	gone(t, m, &corev1.ConfigMap{}, ns, "leaving")
}
