package testfleet

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Retrying is c, whose writes the API server refuses as unavailable for a moment are
// tried again for up to about half a minute, as the person at kubectl would. A
// MutatingAdmissionPolicy reads a kind's schema from OpenAPI the API server refreshes now
// and then, and while that lags on a loaded machine it refuses the kind's objects with
// "Resource kind ... not found. There can be a delay ..." (503).
func Retrying(c client.Client) client.Client { return retrying{Client: c} }

type retrying struct{ client.Client }

// unavailableBackoff waits 100 ms, then twice as long each time, 8 times: about 25 s.
var unavailableBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 8}

func (r retrying) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return retry.OnError(unavailableBackoff, apierrors.IsServiceUnavailable, func() error { return r.Client.Create(ctx, obj, opts...) })
}

func (r retrying) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return retry.OnError(unavailableBackoff, apierrors.IsServiceUnavailable, func() error { return r.Client.Update(ctx, obj, opts...) })
}

func (r retrying) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return retry.OnError(unavailableBackoff, apierrors.IsServiceUnavailable, func() error { return r.Client.Patch(ctx, obj, patch, opts...) })
}
