package sourcesync_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/helmrepo"
)

// A HelmSync's valuesFrom ConfigMap is read only while whoever last changed the sync may
// get it, asked at each use: admission asks when the spec changes, and a right taken
// away since (or never given, on a hub where admission did not ask) must hold.
func TestValuesFromAConfigMapNeedTheRightToReadIt(t *testing.T) {
	const ns = "hs-values-right"
	ctx := context.Background()
	member := fleet.Members[0]
	repo := helmrepo.NewRepo(t)
	repo.Add(helmrepo.Chart(t, helmrepo.CapsChart, "1.0.0"))
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a-values", Namespace: namespace},
		Data:       map[string]string{"values.yaml": "greeting: team-a-only\n"},
	}
	if err := fleet.Hub.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), cm) })
	hs := helmSync("values-right", repo.URL(), helmrepo.CapsChart, func(hs *vidrav1alpha1.HelmSync) {
		hs.Spec.Destination = toCluster(member.Name, ns)
		hs.Spec.ValuesFrom = []vidrav1alpha1.ValuesReference{{Kind: "ConfigMap", Name: cm.Name}}
	})
	hs.Annotations = map[string]string{}
	setAuthor(hs, "team-b")
	create(t, hs)
	condition(t, hs, vidrav1alpha1.ConditionStalled, metav1.ConditionTrue, vidrav1alpha1.ReasonCredentialsRefused)
	if msg := readyMessage(hs); !containsAll(msg, "team-b", "may not get ConfigMap "+namespace+"/"+cm.Name) {
		t.Errorf("Ready says %q, want it to name team-b and the ConfigMap", msg)
	}

	// Granted the right, team-b's sync renders with those values.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "team-b-values", Namespace: namespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cm.Name}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "team-b-values", Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "team-b"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := fleet.Hub.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), o) })
	}
	requestSync(t, hs)
	readyAt(t, hs, "1.0.0")
	waitData(t, member, ns, "values-right-caps", "greeting", "team-a-only")
}
