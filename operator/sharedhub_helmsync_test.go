package operator_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// helmSyncs tries a tenant's (deliver on member 0 only) HelmSyncs: checked by destination
// as the other syncs are, and naming no Secret or ConfigMap of the operator's namespace the
// tenant may not read, since valuesFrom is rendered into what the tenant's cluster gets.
func (h *sharedHub) helmSyncs(t *testing.T) {
	ctx := context.Background()
	m0, m1 := h.fleet.Members[0], h.fleet.Members[1]

	for name, dest := range map[string]vidrav1alpha1.SyncDestination{
		"selector": {ClusterSelector: &metav1.LabelSelector{}},
		"other":    {Destination: vidrav1alpha1.Destination{Cluster: m1.Name}},
		"hub":      {},
		// A server URL is every cluster to admission, even the tenant's own.
		"server": {Destination: vidrav1alpha1.Destination{Server: m0.Server()}},
	} {
		refused(t, h.tenant.Create(ctx, helmSync("tenant-helm-"+name, dest)), tenantUser+" may not deliver to")
	}
	own := helmSync("tenant-helm-own", vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: m0.Name}})
	if err := h.tenant.Create(ctx, own); err != nil {
		t.Fatalf("a HelmSync to the tenant's own cluster is refused: %v", err)
	}
	cleanup(t, h.admin, own)
	// A merge patch, not an update: the operator writes the sync's status meanwhile.
	moved := own.DeepCopy()
	moved.Spec.Destination = vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: m1.Name}}
	refused(t, h.tenant.Patch(ctx, moved, client.MergeFrom(own)), tenantUser+" may not deliver to cluster "+m1.Name)

	// The tenant may read one Secret and one ConfigMap of the operator's namespace; a grant
	// on one kind is none on the other.
	grant(t, h.admin, vidrav1alpha1.UseVerb, "secrets", "tenant-values")
	grant(t, h.admin, "get", "configmaps", "tenant-config")
	ns := testoperator.Namespace + "/"
	unusableSecret := []string{tenantUser + " may not have the operator use a Secret without the right to use it", "use on that Secret"}
	unreadableConfigMap := []string{tenantUser + " may not have the operator render a ConfigMap it may not read", "get on that ConfigMap"}
	for i, c := range []struct {
		name  string
		refs  func(*vidrav1alpha1.HelmSyncSpec)
		wants []string // what the refusal says; none: admitted
	}{
		{"values from a Secret it may not read", valuesFrom("Secret", "other-team-values"),
			append(unusableSecret, ns+"other-team-values")},
		{"values from a Secret it may read", valuesFrom("Secret", "tenant-values"), nil},
		{"values from a ConfigMap it may not read", valuesFrom("ConfigMap", "other-team-config"),
			append(unreadableConfigMap, ns+"other-team-config")},
		{"values from a ConfigMap it may read", valuesFrom("ConfigMap", "tenant-config"), nil},
		{"values from a ConfigMap named as a Secret it may read", valuesFrom("ConfigMap", "tenant-values"),
			append(unreadableConfigMap, ns+"tenant-values")},
		{"values from a Secret named as a ConfigMap it may read", valuesFrom("Secret", "tenant-config"),
			append(unusableSecret, ns+"tenant-config")},
		{"values from both it may read, then one it may not", valuesFrom("Secret", "tenant-values", "ConfigMap", "tenant-config", "Secret", "other-team-values"),
			append(unusableSecret, ns+"other-team-values")},
		{"a repository Secret it may not read", func(s *vidrav1alpha1.HelmSyncSpec) {
			s.Source.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "other-team-helm"}
		}, append(unusableSecret, ns+"other-team-helm")},
		{"a CA Secret it may not read", func(s *vidrav1alpha1.HelmSyncSpec) {
			s.Source.CASecretRef = &vidrav1alpha1.LocalSecretReference{Name: "other-team-ca"}
		}, append(unusableSecret, ns+"other-team-ca")},
		{"a repository Secret it may read", func(s *vidrav1alpha1.HelmSyncSpec) {
			s.Source.SecretRef = &vidrav1alpha1.LocalSecretReference{Name: "tenant-values"}
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Named in a new HelmSync, and in a change to the tenant's own.
			created := helmSync(fmt.Sprintf("tenant-helm-refs-%d", i), own.Spec.Destination)
			c.refs(&created.Spec)
			live := &vidrav1alpha1.HelmSync{}
			if err := h.tenant.Get(ctx, client.ObjectKeyFromObject(own), live); err != nil {
				t.Fatal(err)
			}
			changed := live.DeepCopy()
			changed.Spec.Source.SecretRef, changed.Spec.Source.CASecretRef, changed.Spec.ValuesFrom = nil, nil, nil
			c.refs(&changed.Spec)
			cleanup(t, h.admin, created)
			for _, try := range []struct {
				what string
				err  error
			}{
				{"created", h.tenant.Create(ctx, created)},
				{"patched", h.tenant.Patch(ctx, changed, client.MergeFrom(live))},
			} {
				switch {
				case c.wants == nil && try.err != nil:
					t.Errorf("%s: refused: %v", try.what, try.err)
				case c.wants != nil:
					t.Run(try.what, func(t *testing.T) { refused(t, try.err, c.wants...) })
				}
			}
		})
	}
}

// helmSync is a suspended HelmSync of a chart that is never fetched.
func helmSync(name string, dest vidrav1alpha1.SyncDestination) *vidrav1alpha1.HelmSync {
	return &vidrav1alpha1.HelmSync{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: vidrav1alpha1.HelmSyncSpec{
		Source:      vidrav1alpha1.HelmSource{RepoURL: "https://charts.example.com", Chart: "app"},
		SyncOptions: vidrav1alpha1.SyncOptions{Destination: dest, Suspend: true},
	}}
}

// valuesFrom sets a HelmSync's valuesFrom from kind, name pairs.
func valuesFrom(kindsAndNames ...string) func(*vidrav1alpha1.HelmSyncSpec) {
	return func(s *vidrav1alpha1.HelmSyncSpec) {
		for i := 0; i+1 < len(kindsAndNames); i += 2 {
			s.ValuesFrom = append(s.ValuesFrom, vidrav1alpha1.ValuesReference{Kind: kindsAndNames[i], Name: kindsAndNames[i+1]})
		}
	}
}
