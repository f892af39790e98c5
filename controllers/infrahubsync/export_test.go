package infrahubsync

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/source/infrahub"
)

// CredentialsFor reads a sync's credentials as the reconcile does, through c (which also
// asks the API server whether the sync's requester may use them).
func CredentialsFor(ctx context.Context, c client.Client, namespace string, ihs *vidrav1alpha1.InfrahubSync, host string) (infrahub.Credentials, error) {
	s := &sources{reader: c, gate: credentials.NewGate(c, c, namespace)}
	return s.credentials(ctx, ihs, host)
}
