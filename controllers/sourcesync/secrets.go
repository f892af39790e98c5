package sourcesync

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/controllers/syncs"
	"github.com/vidra-operator/vidra/internal/fleet/credentials"
	"github.com/vidra-operator/vidra/internal/fleet/policy"
)

// caKey is the data key of a CA Secret.
const caKey = "ca.crt"

// Secrets reads the Secrets syncs name, only in the operator's namespace, without
// caching them, for the syncs that may use them (the gate).
type Secrets struct {
	// Reader reads the ConfigMaps a HelmSync's values come from.
	Reader client.Reader
	// Gate reads Secrets for the syncs whose requester may use them.
	Gate *credentials.Gate
	// Namespace is the operator's.
	Namespace string
}

// data returns the data of the Secret a sync's field names (nil when ref is nil), once
// the gate admits it for the URL its content goes to; url "" is a Secret rendered into
// what the sync delivers (HelmSync values), which goes to no source.
func (s Secrets) data(ctx context.Context, obj Object, field string, ref *vidrav1alpha1.LocalSecretReference, url string) (map[string][]byte, error) {
	if ref == nil {
		return nil, nil
	}
	use := credentials.UseOf(obj, field, vidrav1alpha1.SecretReference{Namespace: s.Namespace, Name: ref.Name}, url)
	var secret *corev1.Secret
	var err error
	if url == "" {
		secret, err = s.Gate.GetRendered(ctx, use)
	} else {
		secret, err = s.Gate.Get(ctx, use)
	}
	if err != nil {
		return nil, gateFailure(err)
	}
	return secret.Data, nil
}

// gateFailure is what the gate's error means for the sync: a refusal stalls it, any
// other error is tried again.
func gateFailure(err error) error {
	var refusal *credentials.Refusal
	if errors.As(err, &refusal) {
		return &syncs.Failure{Reason: refusal.Reason, Stalled: true, Err: err}
	}
	return &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true, Err: err}
}

// mayRead checks that whoever last changed the sync may still read the ConfigMap name
// of the operator's namespace, which field names.
func (s Secrets) mayRead(ctx context.Context, obj Object, field, name string) error {
	var requester *policy.Requester
	if who, ok := policy.RequesterOf(obj.GetAnnotations()); ok {
		requester = &who
	}
	if err := s.Gate.AuthorizeConfigMap(ctx, obj.SyncKind().Kind+" "+obj.GetName(), field, name, requester); err != nil {
		return gateFailure(err)
	}
	return nil
}

// configMap returns the data of the ConfigMap name of the operator's namespace, which
// field names, once whoever last changed the sync may still get it (mayRead); found is
// false when it does not exist, which each field says in its own words.
func (s Secrets) configMap(ctx context.Context, obj Object, field, name string) (data map[string]string, found bool, err error) {
	if err := s.mayRead(ctx, obj, field, name); err != nil {
		return nil, false, err
	}
	cm := &corev1.ConfigMap{}
	err = s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, &syncs.Failure{Reason: vidrav1alpha1.ReasonFetchFailed, Transient: true,
			Err: fmt.Errorf("%s: get ConfigMap %s/%s: %w", field, s.Namespace, name, err)}
	}
	return cm.Data, true, nil
}

// ca returns the PEM bundle of a CA Secret (nil when ref is nil) that verifies url.
func (s Secrets) ca(ctx context.Context, obj Object, ref *vidrav1alpha1.LocalSecretReference, url string) ([]byte, error) {
	data, err := s.data(ctx, obj, "spec.source.caSecretRef", ref, url)
	if err != nil || ref == nil {
		return nil, err
	}
	if len(data[caKey]) == 0 {
		return nil, &syncs.Failure{Reason: vidrav1alpha1.ReasonSourceInvalid, Stalled: true,
			Err: fmt.Errorf("spec.source.caSecretRef: Secret %s/%s has no %s", s.Namespace, ref.Name, caKey)}
	}
	return data[caKey], nil
}

// basicAuth returns the username and password of the Secret secretRef names and the CA
// bundle of caRef's, both optional, for url: what an OCISync or a HelmSync authenticates
// with.
func (s Secrets) basicAuth(ctx context.Context, obj Object, secretRef, caRef *vidrav1alpha1.LocalSecretReference, url string) (username, password string, ca []byte, err error) {
	data, err := s.data(ctx, obj, "spec.source.secretRef", secretRef, url)
	if err != nil {
		return "", "", nil, err
	}
	if ca, err = s.ca(ctx, obj, caRef, url); err != nil {
		return "", "", nil, err
	}
	return string(data[usernameKey]), string(data[passwordKey]), ca, nil
}
