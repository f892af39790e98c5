package infrahubsync

import (
	"context"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/policy"
)

// admissionRefusal says why the InfrahubSync may not be synced for want of what
// admission checks (its reason and why; "" when it may). Without the hub's admission
// policies no sync is: a person wrote it, and they check that person's right to deliver
// where it points, and its stamp. With them, that right is asked again: what was written
// while one was missing went unchecked, and is synced once they are back.
func (r *Reconciler) admissionRefusal(ctx context.Context, ihs *vidrav1alpha1.InfrahubSync) (reason, why string, err error) {
	if why := r.Guards.Refusal(ctx, "this InfrahubSync was written by a person, whose right to deliver where it points and whose stamp they check"); why != "" {
		return vidrav1alpha1.ReasonAdmissionPoliciesMissing, why, nil
	}
	if r.Guards == nil {
		return "", "", nil
	}
	d := ihs.Spec.Destination
	reach := policy.SyncReach(d.Destination, d.ClusterSelector != nil || d.ClusterFromTarget, ihs.Spec.Template)
	if why, err = policy.RequesterRefusal(ctx, r.Hub, ihs.Annotations, reach); err != nil || why == "" {
		return "", "", err
	}
	return vidrav1alpha1.ReasonPolicyDenied, why, nil
}
