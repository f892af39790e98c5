package vidraresource

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/internal/ownership"
)

// health reads every object and computes its kstatus: Ready needs each one Current.
// It returns the objects still in progress and those that failed, each with the reason.
func health(ctx context.Context, c client.Client, refs []ownership.Ref) (inProgress, failed []string, err error) {
	for _, ref := range refs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(ref.GVK)
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
			return nil, nil, fmt.Errorf("read %s for its status: %w", ref, err)
		}
		result, err := status.Compute(u)
		if err != nil {
			return nil, nil, fmt.Errorf("compute status of %s: %w", ref, err)
		}
		switch result.Status {
		case status.CurrentStatus:
		case status.FailedStatus:
			failed = append(failed, fmt.Sprintf("%s: %s", ref, result.Message))
		default:
			inProgress = append(inProgress, fmt.Sprintf("%s: %s", ref, result.Message))
		}
	}
	return inProgress, failed, nil
}
