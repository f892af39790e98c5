package admissionguard

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/policy"
)

// SyncRefusal says why a sync of kind may not be synced for want of what admission
// checks: its condition's reason and why ("" when it may). Without the hub's admission
// policies no sync is: a person wrote it, and they check that person's right to deliver
// where it points, and its stamp. With them, the right of whoever its annotations record
// to deliver where reach says is asked of hub again: what was written while one was
// missing went unchecked, and is synced once they are back. A nil c requires nothing.
func (c *Checker) SyncRefusal(ctx context.Context, hub client.Client, kind string, annotations map[string]string, reach policy.Reach) (reason, why string, err error) {
	if c == nil {
		return "", "", nil
	}
	if why := c.Refusal(ctx, "this "+kind+" was written by a person, whose right to deliver where it points and whose stamp they check"); why != "" {
		return vidrav1alpha1.ReasonAdmissionPoliciesMissing, why, nil
	}
	if why, err = policy.RequesterRefusal(ctx, hub, annotations, reach); err != nil || why == "" {
		return "", "", err
	}
	return vidrav1alpha1.ReasonPolicyDenied, why, nil
}
