package operator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/test/testoperator"
)

// referenceSlots is how many Secrets, and how many ConfigMaps, the chart's deliver policy
// checks for one sync (vidra.referenceSlots).
const referenceSlots = 8

// manyReferences has the tenant name as many Secrets and ConfigMaps as the policy checks,
// with a change that has it check the destination before and after too: the most a sync
// asks of the authorizer, within Kubernetes' cost budget. Kubernetes prices a check at a
// third of what one expression may cost, so checks are one variable per reference.
func (h *sharedHub) manyReferences(t *testing.T) {
	ctx := context.Background()
	m0 := h.fleet.Members[0]
	names := make([]string, referenceSlots)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-ref-%d", i)
		grant(t, h.admin, vidrav1alpha1.UseVerb, "secrets", names[i])
		grant(t, h.admin, "get", "configmaps", names[i])
	}
	// Three Secrets in the source and decryption, the rest, one named again, and every
	// ConfigMap in substituteFrom.
	var from []vidrav1alpha1.SubstituteReference
	for _, n := range append(names[3:], names[0]) {
		from = append(from, vidrav1alpha1.SubstituteReference{Kind: "Secret", Name: n})
	}
	for _, n := range names {
		from = append(from, vidrav1alpha1.SubstituteReference{Kind: "ConfigMap", Name: n})
	}
	sync := &vidrav1alpha1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: "tenant-git-refs"}, Spec: vidrav1alpha1.GitSyncSpec{
		Source: vidrav1alpha1.GitSource{URL: "https://git.example.com/r.git",
			SecretRef:   &vidrav1alpha1.LocalSecretReference{Name: names[0]},
			CASecretRef: &vidrav1alpha1.LocalSecretReference{Name: names[1]}},
		Decryption: &vidrav1alpha1.Decryption{Provider: vidrav1alpha1.DecryptionProviderSOPS,
			SecretRef: vidrav1alpha1.LocalSecretReference{Name: names[2]}},
		PostBuild: &vidrav1alpha1.PostBuild{SubstituteFrom: from},
		SyncOptions: vidrav1alpha1.SyncOptions{Suspend: true,
			Destination: vidrav1alpha1.SyncDestination{Destination: vidrav1alpha1.Destination{Cluster: m0.Name}}},
	}}
	if err := h.tenant.Create(ctx, sync); err != nil {
		t.Fatalf("a sync naming %d Secrets and %d ConfigMaps its author may use is refused: %v", referenceSlots, referenceSlots, err)
	}
	cleanup(t, h.admin, sync)

	changed := sync.DeepCopy()
	changed.Spec.Interval = &metav1.Duration{Duration: 7 * time.Minute}
	if err := h.tenant.Patch(ctx, changed, client.MergeFrom(sync)); err != nil {
		t.Errorf("a change to a sync naming %d Secrets and %d ConfigMaps is refused: %v", referenceSlots, referenceSlots, err)
	}

	// The last one checked is someone else's.
	theirs := changed.DeepCopy()
	theirs.Spec.PostBuild.SubstituteFrom[referenceSlots-4] = vidrav1alpha1.SubstituteReference{Kind: "Secret", Name: "other-team-git"}
	refused(t, h.tenant.Patch(ctx, theirs, client.MergeFrom(changed)),
		tenantUser+" may not have the operator use a Secret without the right to use it", testoperator.Namespace+"/other-team-git")
	theirs = changed.DeepCopy()
	theirs.Spec.PostBuild.SubstituteFrom[len(from)-1].Name = "other-team-vars"
	refused(t, h.tenant.Patch(ctx, theirs, client.MergeFrom(changed)),
		"may not have the operator render a ConfigMap it may not read", testoperator.Namespace+"/other-team-vars")

	// One more than the policy can check is refused, though the tenant may use it.
	grant(t, h.admin, vidrav1alpha1.UseVerb, "secrets", "tenant-ref-extra")
	more := changed.DeepCopy()
	more.Spec.PostBuild.SubstituteFrom = append(more.Spec.PostBuild.SubstituteFrom,
		vidrav1alpha1.SubstituteReference{Kind: "Secret", Name: "tenant-ref-extra"})
	refused(t, h.tenant.Patch(ctx, more, client.MergeFrom(changed)),
		fmt.Sprintf("this sync names %d Secrets", referenceSlots+2), fmt.Sprintf("no more than %d different Secrets", referenceSlots))
}
