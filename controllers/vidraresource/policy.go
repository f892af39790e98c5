package vidraresource

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/policy"
)

// PolicySource gives an enrolled cluster's delivery policy (the cluster provider does).
type PolicySource interface {
	Policy(name multicluster.ClusterName) (pol policy.Policy, engaged bool, err error)
}

// namespacesNarrowed says whether the cluster's delivery policy narrows it to namespaces:
// its identity may then not list or watch what lies outside them.
func (r *Reconciler) namespacesNarrowed(dest *target) bool {
	if r.Policies == nil {
		return false
	}
	pol, engaged, err := r.Policies.Policy(dest.name)
	return engaged && err == nil && len(pol.AllowedNamespaces) > 0
}

// checkPolicy stalls a bundle its cluster's delivery policy refuses, before anything
// reaches the cluster: it is looked at again when the policy or the spec changes.
func (r *Reconciler) checkPolicy(ctx context.Context, d *delivery) *outcome {
	denied := r.policyDenies(ctx, d.vr, d.dest, d.objects)
	if denied == "" {
		return nil
	}
	markStalled(d.vr, vidrav1alpha1.ReasonPolicyDenied, denied)
	r.event(d.vr, corev1.EventTypeWarning, vidrav1alpha1.ReasonPolicyDenied, denied)
	return stop(ctrl.Result{}, nil)
}

// policyDenies says why the cluster's delivery policy refuses the bundle ("" when it
// does not). Objects are placed as the apply would place them (namespaces defaulted,
// cluster-scoped ones without); an object whose kind the cluster does not map cannot be
// applied either, and is left to the apply to report.
func (r *Reconciler) policyDenies(ctx context.Context, vr *vidrav1alpha1.VidraResource, dest *target, objects []*unstructured.Unstructured) string {
	if r.Policies == nil {
		return ""
	}
	pol, engaged, err := r.Policies.Policy(dest.name)
	switch {
	case !engaged:
		return ""
	case err != nil:
		return "the cluster's delivery policy does not parse, so nothing is delivered: " + err.Error()
	case !pol.Restricts():
		return ""
	}
	refs, _ := refsOf(r.engine(ctx, vr, dest, placement{}), objects)
	checked := make([]policy.Object, 0, len(refs))
	for _, ref := range refs {
		checked = append(checked, policy.Object{GVK: ref.GVK, Namespace: ref.Namespace, Name: ref.Name})
	}
	if denied := pol.Check(checked, vr.Spec.Destination.Namespace, vr.Spec.ServiceAccountName); denied != nil {
		return "refused by the cluster's delivery policy, nothing applied: " + denied.Error()
	}
	return ""
}
