package sourcesync

import (
	"context"
	"errors"
	"fmt"
	"time"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/source/bundle"
	"github.com/vidra-operator/vidra/internal/source/ocisource"
)

// OCI is the source of OCISyncs: an artifact, pulled once per URL and digest into Cache,
// and a path of its content built into a bundle.
type OCI struct {
	Secrets Secrets
	Cache   *ocisource.Cache
	// Build bounds the bundle built from a path.
	Build bundle.Limits
	// Timeout bounds one resolve or pull.
	Timeout time.Duration
}

type ociFetch struct {
	remote ocisource.Remote
	rev    ocisource.Revision
	path   string
}

// Resolve asks the registry which manifest the OCISync's ref names, with the sync's own
// credentials, without downloading its layer.
func (o *OCI) Resolve(ctx context.Context, obj Object) (Revision, error) {
	oci := obj.(*vidrav1alpha1.OCISync)
	src := oci.Spec.Source
	p, err := cleanPath(src.Path)
	if err != nil {
		return Revision{}, err
	}
	username, password, ca, err := o.Secrets.basicAuth(ctx, oci, src.SecretRef, src.CASecretRef, src.URL)
	if err != nil {
		return Revision{}, err
	}
	remote := ocisource.Remote{URL: src.URL, Username: username, Password: password, CA: ca, InsecureHTTP: src.InsecureAllowHTTP}
	var ref ocisource.Ref
	if r := src.Ref; r != nil {
		ref = ocisource.Ref{Tag: r.Tag, SemVer: r.SemVer, Digest: r.Digest}
	}
	ctx, cancel := bounded(ctx, o.Timeout)
	defer cancel()
	rev, err := o.Cache.Resolve(ctx, remote, ref)
	if err != nil {
		return Revision{}, ociFailure(err)
	}
	return Revision{
		Name:        rev.String(),
		Key:         fmt.Sprintf("oci\x00%s\x00%s\x00%s", remote.URL, rev.Digest, p),
		Credentials: remote.Fingerprint(),
		Fetch:       ociFetch{remote: remote, rev: rev, path: p},
	}, nil
}

// Bundle pulls the artifact (once per URL and digest) and builds the path.
func (o *OCI) Bundle(ctx context.Context, _ Object, rev Revision) ([]byte, error) {
	f := rev.Fetch.(ociFetch)
	ctx, cancel := bounded(ctx, o.Timeout)
	defer cancel()
	dir, release, err := o.Cache.Pull(ctx, f.remote, f.rev)
	if err != nil {
		return nil, ociFailure(err)
	}
	defer release()
	data, err := bundle.Build(dir, f.path, o.Build)
	if err != nil {
		return nil, buildFailure(rev.Name, err)
	}
	return data, nil
}

// ociFailure says what a registry error means for the sync.
func ociFailure(err error) error {
	var invalid *ocisource.InvalidError
	var notFound *ocisource.NotFoundError
	var artifact *ocisource.InvalidArtifactError
	var limit *ocisource.LimitError
	switch {
	case errors.As(err, &invalid) && invalid.PlainHTTP:
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: fmt.Errorf("%w; set spec.source.insecureAllowHTTP: true to allow it", err)}
	case errors.As(err, &invalid):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true, Err: err}
	case ocisource.IsAuthError(err):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonAuthenticationFailed, Err: err}
	case errors.As(err, &notFound):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonRefNotFound, Err: err}
	case errors.As(err, &artifact):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonBuildFailed, Err: err}
	case errors.As(err, &limit):
		return &syncs.Failure{Reason: vidrav1alpha1.ReasonLimitExceeded, Stalled: true, Err: err}
	}
	return &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: err}
}
