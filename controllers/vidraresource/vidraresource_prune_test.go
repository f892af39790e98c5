package vidraresource_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/engine/ownership"
)

func cmManifest(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: default}\ndata: {k: v}\n"
}

func TestRenamedObjectIsPrunedAndTheNewOneApplied(t *testing.T) {
	member := fleet.Members[1]
	deliver(t, "renamer", vidrav1alpha1.Destination{Cluster: member.Name}, cmManifest("before-rename"))
	ready(t, "renamer")
	updateSpec(t, "renamer", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest = cmManifest("after-rename") })
	vr := ready(t, "renamer")
	gone(t, member, &corev1.ConfigMap{}, "default", "before-rename")
	if !exists(t, member, &corev1.ConfigMap{}, "default", "after-rename") {
		t.Error("the renamed object was not applied")
	}
	if len(vr.Status.ManagedResources) != 1 || vr.Status.ManagedResources[0].Name != "after-rename" {
		t.Errorf("managedResources = %+v", vr.Status.ManagedResources)
	}
}

func TestPruneFalseReleasesWithoutDeleting(t *testing.T) {
	member := fleet.Members[1]
	noPrune := func(vr *vidrav1alpha1.VidraResource) { f := false; vr.Spec.Prune = &f }
	deliver(t, "keeper", vidrav1alpha1.Destination{Cluster: member.Name}, cmManifest("kept-1")+"---\n"+cmManifest("kept-2"), noPrune)
	ready(t, "keeper")
	updateSpec(t, "keeper", func(vr *vidrav1alpha1.VidraResource) { vr.Spec.Manifest = cmManifest("kept-2") })
	ready(t, "keeper")
	cm := &corev1.ConfigMap{}
	if !exists(t, member, cm, "default", "kept-1") || ownership.IsManaged(cm) {
		t.Errorf("kept-1 after leaving the bundle with prune: false: exists %v, labels %v", cm.Name != "", cm.Labels)
	}
	remove(t, "keeper")
	if !exists(t, member, cm, "default", "kept-2") || ownership.IsManaged(cm) {
		t.Error("deleting a VidraResource with prune: false deleted its objects")
	}
}
