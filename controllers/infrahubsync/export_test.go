package infrahubsync

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/infrahub"
)

// CredentialsFor reads a source's credentials as a sync does, through reader.
func CredentialsFor(ctx context.Context, reader client.Reader, namespace string, src vidrav1alpha1.InfrahubSyncSource, host string) (infrahub.Credentials, error) {
	s := &sources{reader: reader, namespace: namespace}
	return s.credentials(ctx, src, host)
}
