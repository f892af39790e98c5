package admissionguard

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// SyncRefusal says why a sync of kind may not be synced for want of what admission
// checks: its condition's reason and why ("" when it may). Without the hub's admission
// policies no sync is: a person wrote it, and they check that person's right to deliver
// where it points, and its stamp. With them, the right of whoever its annotations record
// to deliver where reach says is asked of hub again; and a sync last written while one
// was missing, when its stamp cannot be trusted, waits until it is written again. A nil
// c requires nothing.
func (c *Checker) SyncRefusal(ctx context.Context, hub client.Client, kind string, sync metav1.Object, reach policy.Reach) (reason, why string, err error) {
	if c == nil {
		return "", "", nil
	}
	if why := c.Refusal(ctx, "this "+kind+" was written by a person, whose right to deliver where it points and whose stamp they check"); why != "" {
		return vidrav1alpha1.ReasonAdmissionPoliciesMissing, why, nil
	}
	if why := c.RecordRefusal(sync, "this "+kind); why != "" {
		return vidrav1alpha1.ReasonPolicyDenied, why, nil
	}
	if why, err = policy.RequesterRefusal(ctx, hub, sync.GetAnnotations(), reach); err != nil || why == "" {
		return "", "", err
	}
	return vidrav1alpha1.ReasonPolicyDenied, why, nil
}
