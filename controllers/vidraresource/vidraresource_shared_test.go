package vidraresource_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

func TestSharedNamespaceSurvivesUntilLastOwnerLeaves(t *testing.T) {
	member := fleet.Members[0]
	dest := vidrav1alpha1.Destination{Cluster: member.Name}
	bundle := func(cm string) string {
		return "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + cm + ", namespace: team}\n"
	}
	deliver(t, "team-a", dest, bundle("a"))
	deliver(t, "team-b", dest, bundle("b"))
	ready(t, "team-a")
	ready(t, "team-b")
	ns := &corev1.Namespace{}
	if !exists(t, member, ns, "", "team") || !owned(t, ns, "hub/team-a", "hub/team-b") {
		t.Fatalf("shared namespace owners = %v", ns.Annotations)
	}

	remove(t, "team-a")
	gone(t, member, &corev1.ConfigMap{}, "team", "a")
	if !exists(t, member, ns, "", "team") || !ns.DeletionTimestamp.IsZero() || !owned(t, ns, "hub/team-b") {
		t.Fatalf("the shared namespace did not survive its first owner: %v", ns.Annotations)
	}
	if !exists(t, member, &corev1.ConfigMap{}, "team", "b") {
		t.Fatal("the remaining owner's ConfigMap went with the other owner")
	}

	remove(t, "team-b")
	gone(t, member, &corev1.Namespace{}, "", "team")
}
